package healthcheck

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Outcomes of MYSQL checks.
const (
	// OutcomeAuth: the server refused the check's user or password.
	OutcomeAuth = "auth failed"
	// OutcomeQuery: the server accepted the login but the query failed.
	OutcomeQuery = "query error"
)

// MySQL error numbers of a refused login.
var mysqlAuthErrors = map[uint16]bool{
	1044: true, // ER_DBACCESS_DENIED_ERROR
	1045: true, // ER_ACCESS_DENIED_ERROR
	1698: true, // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
	1251: true, // ER_NOT_SUPPORTED_AUTH_MODE
}

// probeMySQL opens one connection (through the probe policy), authenticates, runs the
// spec's query, reads its result to the end and closes the connection; nothing is
// pooled across probes. Everything is bounded by ctx. The driver's logger is
// silenced, and no outcome carries the driver's or the server's text: only Roster's
// words and MySQL error numbers, so the password cannot leak through a result.
func (c *checker) probeMySQL(ctx context.Context, s *spec, addr string) outcome {
	var (
		mu      sync.Mutex
		dialErr error
	)
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", addr
	cfg.User, cfg.Passwd = s.hc.User, s.hc.Password
	cfg.Logger = &mysql.NopLogger{}
	cfg.DialFunc = func(dctx context.Context, _, a string) (net.Conn, error) {
		conn, err := c.connect(dctx, a)
		if err != nil {
			mu.Lock()
			dialErr = err
			mu.Unlock()
			return nil, err
		}
		deadlineFromContext(ctx, conn) // fires at the latest when the probe's ctx ends
		return resetOnClose{conn}, nil
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return outcome{class: OutcomeError, err: "invalid MySQL configuration"}
	}
	conn, err := connector.Connect(ctx)
	if err != nil {
		mu.Lock()
		de := dialErr
		mu.Unlock()
		if de != nil {
			return dialFailed(de)
		}
		return mysqlFailed(ctx, err, false)
	}
	defer func() { _ = conn.Close() }()
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return outcome{class: OutcomeError, err: "the MySQL driver cannot run queries"}
	}
	rows, err := q.QueryContext(ctx, s.hc.Query, nil)
	if err != nil {
		return mysqlFailed(ctx, err, true)
	}
	dest := make([]driver.Value, len(rows.Columns()))
	for {
		if err := rows.Next(dest); err != nil {
			_ = rows.Close()
			if errors.Is(err, io.EOF) {
				return outcome{ok: true}
			}
			return mysqlFailed(ctx, err, true)
		}
	}
}

// mysqlFailed classifies an error of the login (query false) or of the query. The
// driver reports a read cut by the connection's deadline as a broken connection, so
// an error at or after ctx's deadline is a timeout.
func mysqlFailed(ctx context.Context, err error, query bool) outcome {
	var me *mysql.MySQLError
	dl, hasDeadline := ctx.Deadline()
	switch {
	case ctx.Err() != nil || (hasDeadline && !time.Now().Before(dl)):
		return outcome{class: OutcomeTimeout, err: "timeout"}
	case errors.As(err, &me):
		code := strconv.Itoa(int(me.Number))
		if mysqlAuthErrors[me.Number] {
			return outcome{class: OutcomeAuth, err: "access denied (MySQL error " + code + ")"}
		}
		if query {
			return outcome{class: OutcomeQuery, err: "query failed (MySQL error " + code + ")"}
		}
		return outcome{class: OutcomeError, err: "the server refused the connection (MySQL error " + code + ")"}
	case isTimeout(err), errors.Is(err, context.Canceled):
		return outcome{class: OutcomeTimeout, err: "timeout"}
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return outcome{class: OutcomeReset, err: "connection closed by the server"}
	case errors.Is(err, mysql.ErrMalformPkt), errors.Is(err, mysql.ErrPktSync), errors.Is(err, mysql.ErrPktSyncMul):
		return outcome{class: OutcomeMalformed, err: "malformed MySQL response"}
	}
	var ne *net.OpError
	if errors.As(err, &ne) {
		return readFailed(err)
	}
	if query {
		return outcome{class: OutcomeQuery, err: "query failed"}
	}
	return outcome{class: OutcomeError, err: "MySQL login failed"}
}

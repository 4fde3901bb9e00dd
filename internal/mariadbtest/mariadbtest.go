// Package mariadbtest starts a throw-away MariaDB (or MySQL) server for a test: its own
// data directory, a Unix socket and a TCP port on 127.0.0.1, stopped when the test
// ends. It needs the server binaries (Debian's mariadb-server). Outside CI a test
// without them is skipped; with CI=true it fails.
package mariadbtest

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/rosterhq/roster/internal/testtool"
	"github.com/rosterhq/roster/internal/wait"
)

// Server is a running test server.
type Server struct {
	// Addr is its TCP address, 127.0.0.1:port.
	Addr   string
	Port   int
	socket string
	dir    string
	cmd    *exec.Cmd
	done   chan struct{}
	once   sync.Once
}

// find returns the path of the first of names found in PATH or in /usr/sbin and
// /usr/bin (Debian keeps the server in /usr/sbin, often not in PATH).
func find(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
		for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
			p := filepath.Join(dir, n)
			if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
				return p
			}
		}
	}
	return ""
}

// Start initialises a data directory and starts a server on a free loopback port. It
// waits until the server accepts connections; root may log in over the socket without
// a password (Exec).
func Start(t testing.TB) *Server {
	t.Helper()
	server, install := find("mariadbd", "mysqld"), find("mariadb-install-db", "mysql_install_db")
	if server == "" || install == "" {
		testtool.Missing(t, "mariadbd/mariadb-install-db", "Debian: apt-get install mariadb-server")
	}
	// The socket path must be short (sun_path is 108 bytes): not t.TempDir's.
	dir, err := os.MkdirTemp("", "mariadbtest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	userArg := "--user=" + currentUser()
	out, err := exec.Command(install, "--no-defaults", "--auth-root-authentication-method=normal",
		"--skip-test-db", "--datadir="+data, userArg).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadbtest: %s: %v\n%s", install, err, out)
	}
	s := &Server{socket: filepath.Join(dir, "sock"), dir: dir, Port: freePort(t)}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	var log bytes.Buffer
	s.cmd = exec.Command(server, "--no-defaults", "--datadir="+data, userArg,
		"--bind-address=127.0.0.1", "--port="+strconv.Itoa(s.Port), "--socket="+s.socket,
		"--pid-file="+filepath.Join(dir, "pid"), "--skip-name-resolve", "--skip-log-bin",
		"--innodb-buffer-pool-size=16M", "--log-error="+filepath.Join(dir, "error.log"))
	s.cmd.Stdout, s.cmd.Stderr = &log, &log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("mariadbtest: start %s: %v", server, err)
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.Stop)
	wait.For(t, 30*time.Second, "mariadbd to accept connections on "+s.Addr, func() bool {
		select {
		case <-s.done:
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("mariadbtest: the server exited:\n%s\n%s", log.String(), b)
		default:
		}
		db := s.rootDB()
		defer func() { _ = db.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if db.PingContext(ctx) != nil {
			return false
		}
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
	return s
}

// Exec runs statements as root over the socket.
func (s *Server) Exec(t testing.TB, stmts ...string) {
	t.Helper()
	db := s.rootDB()
	defer func() { _ = db.Close() }()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("mariadbtest: %s: %v", q, err)
		}
	}
}

// CreateUser creates a user that may log in from 127.0.0.1 with password.
func (s *Server) CreateUser(t testing.TB, name, password string) {
	t.Helper()
	s.Exec(t, fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", name, password),
		fmt.Sprintf("GRANT USAGE ON *.* TO '%s'@'127.0.0.1'", name))
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s) and waits for it to exit.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
}

func (s *Server) rootDB() *sql.DB {
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User = "unix", s.socket, "root"
	cfg.Logger = &mysql.NopLogger{}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		panic(err)
	}
	return sql.OpenDB(c)
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}

// freePort returns a TCP port free on 127.0.0.1 a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

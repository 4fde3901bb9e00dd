package healthcheck

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Probe outcomes, as Result.Outcome reports them. A failed probe is classified; its
// error text is written by the prober and never contains bytes read from the target,
// so the results API cannot be used to read what answers at an arbitrary address.
const (
	OutcomeSuccess = "success"
	// OutcomeDenied: the probe policy refused the address; nothing was sent.
	OutcomeDenied = "denied"
	// OutcomeRefused: the connection was refused (nothing listens on the port).
	OutcomeRefused = "refused"
	// OutcomeTimeout: the check did not complete within its timeout.
	OutcomeTimeout = "timeout"
	// OutcomeReset: the connection was reset or closed before a complete response.
	OutcomeReset = "reset"
	// OutcomeUnreachable: no route to the host or network.
	OutcomeUnreachable = "unreachable"
	// OutcomeDNS: the instance's host name did not resolve.
	OutcomeDNS = "dns"
	// OutcomeStatus: an HTTP response with a status the check does not expect
	// (Result.Status has it).
	OutcomeStatus = "status"
	// OutcomeMalformed: the target answered with something that is not an HTTP response.
	OutcomeMalformed = "malformed response"
	// OutcomeError: any other failure to connect.
	OutcomeError = "error"
)

// classifyDial classifies an error of opening or writing to a probe connection.
func classifyDial(err error) (class, msg string) {
	var de *DeniedError
	var dns *net.DNSError
	switch {
	case errors.As(err, &de):
		return OutcomeDenied, de.Error()
	case isTimeout(err):
		return OutcomeTimeout, "timeout"
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return OutcomeDNS, "host " + dns.Name + " not found"
		}
		return OutcomeDNS, "resolving host " + dns.Name + " failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return OutcomeRefused, "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED):
		return OutcomeReset, "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EADDRNOTAVAIL):
		return OutcomeUnreachable, "host or network unreachable"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return OutcomeError, "connect failed: " + errno.Error()
	}
	return OutcomeError, "connect failed"
}

// classifyRead classifies an error of reading an HTTP response. Parse errors carry the
// bytes that did not parse (net/http quotes them), so none of their text is kept.
func classifyRead(err error) (class, msg string) {
	switch {
	case isTimeout(err):
		return OutcomeTimeout, "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return OutcomeReset, "connection closed before a complete response"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return OutcomeReset, "connection reset"
	}
	var ne *net.OpError
	if errors.As(err, &ne) {
		return classifyDial(err)
	}
	return OutcomeMalformed, "malformed HTTP response"
}

func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

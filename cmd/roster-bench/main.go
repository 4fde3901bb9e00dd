// Command roster-bench is Roster's load generator: closed-loop workloads against a
// running Roster or etcd cluster (`roster-bench`), a comparison of their reports
// (`roster-bench compare`), leader-kill failover trials (`roster-bench failover`,
// `roster-bench failover-report`) and the SSE fan-out measurement (`roster-bench fanout`).
// It is a binary of its own so that the server binary, roster, links none of it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes: 0 success, 1 the benchmark failed, 2 the command line is wrong.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal a second one kills the process.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError marks an error in the command line itself.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// run executes one command line and returns the process exit code; the error is
// printed to stderr as "roster-bench: <message>".
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newBenchCmd()
	root.SilenceUsage, root.SilenceErrors = true, true
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "roster-bench: %s\n", err)
	if errors.As(err, new(usageError)) {
		return exitUsage
	}
	return exitError
}

// Command roster is Roster's binary: the server (`roster server`, `roster dev`), a
// command-line client of the native REST API and the demo backend. The load generator
// is a binary of its own, cmd/roster-bench, which this one does not link.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal a second one kills the process, even mid-shutdown.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], newApp(os.Stdout, os.Stderr, os.LookupEnv))
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code (exit.go): 0 on
// success, 1 when the command failed, 2 when the command line was wrong (nothing was
// sent). The error is printed to stderr as "roster: <message>".
func run(ctx context.Context, args []string, a *app) int {
	root := a.rootCmd()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		var q quietError
		if !errors.As(err, &q) {
			printError(a.stderr, err)
		}
	}
	return exitCode(err)
}

// printError prints err escaped: a server's message may quote data (safeText).
func printError(w io.Writer, err error) {
	fmt.Fprintf(w, "roster: %s\n", safeText(err.Error()))
}

// quietError fails the command without a message (the command has printed what it had
// to say already).
type quietError struct{ error }

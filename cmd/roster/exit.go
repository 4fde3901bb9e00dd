package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of every roster command (docs/operations.md, "Exit codes").
const (
	// exitOK: the command did what it was asked.
	exitOK = 0
	// exitError: the command failed while running: the API answered an error (not
	// found, conflict, refused, no leader...), a node could not be reached, a node is not
	// ready (roster ready), a data directory has problems (roster check), a node failed.
	exitError = 1
	// exitUsage: the command line was not understood or was refused before anything was
	// sent or started: an unknown command or flag, a wrong number of arguments, a flag
	// or environment value that does not parse or is out of range, a missing required
	// flag, flags that do not go together.
	exitUsage = 2
)

// usageError marks an error in the command line itself (exit code exitUsage). The
// command has sent nothing and changed nothing.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usagef returns a usageError with the formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// asUsage marks err, when it is not nil, as a usage error.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// flagError is every command's FlagErrorFunc: a flag that cobra could not parse (an
// unknown flag, a missing or malformed value) is a usage error.
func flagError(_ *cobra.Command, err error) error { return asUsage(err) }

// exitCode maps the error a command returned to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	// Errors cobra makes itself, before any command runs: an unknown (sub)command, and
	// a required flag that is missing.
	msg := err.Error()
	for _, p := range []string{"unknown command ", "required flag(s) "} {
		if strings.HasPrefix(msg, p) {
			return exitUsage
		}
	}
	return exitError
}

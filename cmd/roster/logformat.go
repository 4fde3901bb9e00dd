package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/pflag"
)

// Log formats of --log-format.
const (
	logFormatText = "text"
	logFormatJSON = "json"
)

// logFormat is the value of --log-format: text or json. A flag of it refuses any other
// value when parsed, so that a bad --log-format or ROSTER_LOG_FORMAT fails before
// anything starts and names where it came from.
type logFormat string

func (f *logFormat) String() string { return string(*f) }

func (f *logFormat) Type() string { return "format" }

func (f *logFormat) Set(v string) error {
	switch v {
	case logFormatText, logFormatJSON:
		*f = logFormat(v)
		return nil
	}
	return fmt.Errorf("want %s or %s", logFormatText, logFormatJSON)
}

// logFormatFlag adds --log-format (ROSTER_LOG_FORMAT), default text.
func logFormatFlag(fs *pflag.FlagSet, format *logFormat) {
	*format = logFormatText
	fs.Var(format, "log-format", "log format: text (key=value pairs) or json (one JSON object a line); hashicorp/raft's lines included")
}

// newFormatLogger returns a logger on w at the named level (debug, info, warn or error)
// in the named format (text or json). Every log line of the node goes through it,
// hashicorp/raft's included.
func newFormatLogger(w io.Writer, level string, format logFormat) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case logFormatText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case logFormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want %s or %s", format, logFormatText, logFormatJSON)
}

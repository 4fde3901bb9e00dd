package raftnode

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hcLogger adapts an slog.Logger to the hclog.Logger interface hashicorp/raft logs
// through. The level filter stays with the slog handler; SetLevel is ignored.
type hcLogger struct {
	base *slog.Logger // with the implied args, without the name
	l    *slog.Logger // base with the name
	name string
	args []any
}

var _ hclog.Logger = (*hcLogger)(nil)

func newHCLogger(l *slog.Logger, name string) *hcLogger {
	return &hcLogger{base: l, l: l.With("logger", name), name: name}
}

// slogLevel maps hclog levels; Trace sits below slog's Debug.
func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (h *hcLogger) Log(level hclog.Level, msg string, args ...any) {
	for i, a := range args {
		if i%2 == 0 {
			// hashicorp/raft describes itself under "node" ("node", r); that would
			// duplicate the node id attribute Roster's loggers carry.
			if a == "node" {
				args[i] = "raft_node"
			}
			continue
		}
		switch v := a.(type) {
		case hclog.Format:
			// hclog.Fmt values are printf-style: format them as hclog does.
			if len(v) > 0 {
				if format, ok := v[0].(string); ok {
					args[i] = fmt.Sprintf(format, v[1:]...)
				}
			}
		case error:
			// slog's handlers print errors with Error().
		case fmt.Stringer:
			// As hclog does; a JSON handler would otherwise marshal the value's exported
			// fields (hashicorp/raft's *Raft has none: "{}").
			args[i] = v.String()
		}
	}
	h.l.Log(context.Background(), slogLevel(level), msg, args...)
}

func (h *hcLogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hcLogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hcLogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hcLogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hcLogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hcLogger) enabled(level hclog.Level) bool {
	return h.l.Enabled(context.Background(), slogLevel(level))
}

func (h *hcLogger) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hcLogger) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hcLogger) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hcLogger) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hcLogger) IsError() bool { return h.enabled(hclog.Error) }

func (h *hcLogger) ImpliedArgs() []any { return h.args }

func (h *hcLogger) With(args ...any) hclog.Logger {
	return &hcLogger{
		base: h.base.With(args...),
		l:    h.l.With(args...),
		name: h.name,
		args: append(append([]any(nil), h.args...), args...),
	}
}

func (h *hcLogger) Name() string { return h.name }

func (h *hcLogger) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}

func (h *hcLogger) ResetNamed(name string) hclog.Logger {
	return &hcLogger{base: h.base, l: h.base.With("logger", name), name: name, args: h.args}
}

func (h *hcLogger) SetLevel(hclog.Level) {}

func (h *hcLogger) GetLevel() hclog.Level {
	for _, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if h.enabled(lv) {
			return lv
		}
	}
	return hclog.Off
}

func (h *hcLogger) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(h.l.Handler(), slog.LevelInfo)
}

func (h *hcLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return h.StandardLogger(opts).Writer()
}

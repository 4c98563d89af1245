package logging

import (
	"io"
	"log/slog"
)

// Log levels beyond slog's, for log_level 3 (verbose) and 5 (trace).
const (
	LevelVerbose = slog.Level(-2)
	LevelTrace   = slog.Level(-8)
)

// LogLevel maps the reference's log_level (1 warning, 2 info, 3 verbose,
// 4 debug, 5 trace) to a slog level.
func LogLevel(logLevel int) slog.Level {
	switch {
	case logLevel <= 1:
		return slog.LevelWarn
	case logLevel == 2:
		return slog.LevelInfo
	case logLevel == 3:
		return LevelVerbose
	case logLevel == 4:
		return slog.LevelDebug
	default:
		return LevelTrace
	}
}

// NewLogger writes JSON lines to w at logLevel and above.
func NewLogger(w io.Writer, logLevel int) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: LogLevel(logLevel)}))
}

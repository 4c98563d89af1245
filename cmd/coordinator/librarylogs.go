package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/grpclog"

	"github.com/coordinator-project/coordinator/service/logging"
)

// routeLibraryLogs sends what the process's libraries print on their own
// through log, so that every line the process writes once started is one
// of log's JSON lines:
//   - grpclog, which grpc-go and grpc-gateway write to (a stream whose
//     client went away, a header the gateway will not forward): info as
//     debug, warnings and errors as they are;
//   - the standard log package (net/http's server errors, OpenTelemetry's
//     own errors while tracing is off) at warning;
//   - go-redis's connection pool complaints (a Redis that is down at start
//     says so once, in the start failure) as debug lines.
//
// It sets process-wide loggers: main calls it once, before the app is
// built.
func routeLibraryLogs(log *slog.Logger) {
	grpclog.SetLoggerV2(grpcLog{log})
	slog.SetDefault(log)
	slog.SetLogLoggerLevel(slog.LevelWarn)
	redis.SetLogger(redisLog{log})
}

// redisLog is go-redis's logger interface over slog.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// grpcLog is grpclog's LoggerV2 over slog: each line a record of its
// level with logger "grpc". A fatal line is logged at error before the
// exit grpclog promises.
type grpcLog struct{ log *slog.Logger }

func (l grpcLog) write(level slog.Level, msg string) {
	l.log.Log(context.Background(), level, strings.TrimSuffix(msg, "\n"), "logger", "grpc")
}

func (l grpcLog) Info(args ...any)   { l.write(slog.LevelDebug, fmt.Sprint(args...)) }
func (l grpcLog) Infoln(args ...any) { l.write(slog.LevelDebug, fmt.Sprintln(args...)) }
func (l grpcLog) Infof(format string, args ...any) {
	l.write(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (l grpcLog) Warning(args ...any)   { l.write(slog.LevelWarn, fmt.Sprint(args...)) }
func (l grpcLog) Warningln(args ...any) { l.write(slog.LevelWarn, fmt.Sprintln(args...)) }
func (l grpcLog) Warningf(format string, args ...any) {
	l.write(slog.LevelWarn, fmt.Sprintf(format, args...))
}
func (l grpcLog) Error(args ...any)   { l.write(slog.LevelError, fmt.Sprint(args...)) }
func (l grpcLog) Errorln(args ...any) { l.write(slog.LevelError, fmt.Sprintln(args...)) }
func (l grpcLog) Errorf(format string, args ...any) {
	l.write(slog.LevelError, fmt.Sprintf(format, args...))
}
func (l grpcLog) Fatal(args ...any)   { l.write(slog.LevelError, fmt.Sprint(args...)); os.Exit(1) }
func (l grpcLog) Fatalln(args ...any) { l.write(slog.LevelError, fmt.Sprintln(args...)); os.Exit(1) }
func (l grpcLog) Fatalf(format string, args ...any) {
	l.write(slog.LevelError, fmt.Sprintf(format, args...))
	os.Exit(1)
}

// V reports whether grpc's verbose lines (levels above 0) are logged: only
// at log_level 5 (trace).
func (l grpcLog) V(level int) bool {
	return level <= 0 || l.log.Enabled(context.Background(), logging.LevelTrace)
}

var _ grpclog.LoggerV2 = grpcLog{}

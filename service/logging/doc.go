// Package logging is how the coordinator logs: the JSON logger at the
// reference's log_level (logging.go) and the gRPC interceptor that writes
// one "finished call" line per call (calllog.go).
package logging

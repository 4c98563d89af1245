package service

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/coordinator-project/coordinator/internal/fleet"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/steps"
)

// headerServerTiming carries the step timings to the client: gRPC header
// metadata, and the REST front's Server-Timing header.
const headerServerTiming = "server-timing"

// serverTiming renders the steps run so far as a Server-Timing value,
// durations in milliseconds: "render;dur=1.2, prefill;dur=35.0".
func serverTiming(timings []steps.Timing) string {
	var b strings.Builder
	for _, t := range timings {
		if t.Outcome == steps.OutcomeSkipped {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.Step)
		b.WriteString(";dur=")
		b.WriteString(strconv.FormatFloat(float64(t.Duration.Microseconds())/1000, 'f', 1, 64))
	}
	return b.String()
}

// setServerTiming gives the client the step timings so far (Server-Timing
// header metadata), unless there are none yet: never an empty header.
func setServerTiming(ctx context.Context, timings []steps.Timing) {
	if v := serverTiming(timings); v != "" {
		_ = grpc.SetHeader(ctx, metadata.Pairs(headerServerTiming, v))
	}
}

// answerSink watches the answer on its way to the client: before the
// first byte goes out it records the time to first byte (and a stream's
// Server-Timing header), it sets the header of a worker's answer it
// relays, counts the bytes, times the gaps between a stream's events
// (interToken). Only a Sink's own goroutine calls it. It holds what it
// needs of the call rather than closures over it, and the first timings'
// room (rc.Timings), so that a request makes it in one allocation.
type answerSink struct {
	steps.Sink
	ctx        context.Context // the call's, for its header metadata
	metrics    *metrics.Metrics
	api        string
	rc         *steps.RequestContext
	start      time.Time // the request's arrival
	interToken prometheus.Observer
	started    bool
	last       time.Time // when the previous events went out
	bytes      int
	timings    [8]steps.Timing // rc.Timings' first room
	// fleet is the fleet's weight version, version what it was when the
	// request started (x-weight-version).
	fleet   *fleet.Version
	version string
}

// versions are the fleet's weight versions over the answer so far: the
// one at its start, and the current one when another.
func (s *answerSink) versions() string {
	now := s.fleet.Get()
	switch {
	case s.version == "":
		return now
	case now == "" || now == s.version:
		return s.version
	}
	return s.version + "," + now
}

// Header implements steps.Sink: the sinks it wraps leave answer headers to
// it.
func (s *answerSink) Header(h http.Header) {
	setAnswerHeader(s.ctx, h, s.rc, s.versions())
}

func (s *answerSink) first() {
	if !s.started {
		s.started = true
		s.metrics.FirstByte(s.api, s.rc.Format.String(), time.Since(s.start))
		if s.rc.Stream { // the header goes out with the first event
			setServerTiming(s.ctx, s.rc.Timings)
		}
	}
}

func (s *answerSink) Response(status int, contentType string, body []byte) error {
	s.first()
	s.bytes += len(body)
	return s.Sink.Response(status, contentType, body)
}

func (s *answerSink) Events(data [][]byte, names []string) error {
	s.first()
	now := time.Now()
	tokens := 0
	for _, d := range data {
		s.bytes += len(d)
		if string(d) == "[DONE]" {
			continue
		}
		tokens++
	}
	if !s.last.IsZero() && tokens > 0 {
		gap := now.Sub(s.last).Seconds() / float64(tokens)
		for range tokens {
			s.interToken.Observe(gap)
		}
	}
	if tokens > 0 {
		s.last = now
	}
	return s.Sink.Events(data, names)
}

// timingsValue logs the steps that ran with their durations.
type timingsValue []steps.Timing

func (t timingsValue) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(t))
	for _, s := range t {
		if s.Outcome != steps.OutcomeSkipped {
			attrs = append(attrs, slog.Duration(s.Step, s.Duration))
		}
	}
	return slog.GroupValue(attrs...)
}

// reportAnswer counts the tokens of an answered request as its answer's
// usage reported them (rc.PD.Usage, recorded by the decode-profile steps).
func (c *Coordinator) reportAnswer(api string, rc *steps.RequestContext, err error) {
	if err != nil || !rc.PD.Usage.Reported {
		return
	}
	c.metrics.Tokens(api, rc.Model, rc.PD.Usage.PromptTokens, rc.PD.Usage.CompletionTokens)
	c.metrics.PromptTokensBilled(rc.PD.Usage)
}

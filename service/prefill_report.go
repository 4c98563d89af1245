package service

import (
	"context"
	"log/slog"

	"github.com/coordinator-project/coordinator/steps"
)

// reportPrefill logs and counts what happened around a request's prefill
// that its answer does not show:
//
//   - a prefill fallback (the prefill step's fallback_to_decode): a warning
//     with the leg's error, and coordinator_prefill_fallbacks_total;
//   - a request that ended (the client left, or its deadline passed) after
//     its prefill completed and before the decode leg was sent: the prefill
//     worker holds the prompt's KV blocks until its own timeout reclaims
//     them (VLLM_NIXL_ABORT_REQUEST_TIMEOUT; docs/robustness.md), so an info
//     line names the request for correlation with the worker's log.
func (c *Coordinator) reportPrefill(ctx context.Context, rc *steps.RequestContext, err error) {
	if f := rc.PD.Fallback; f != nil {
		c.metrics.PrefillFallback(f.Reason)
		c.log.LogAttrs(ctx, slog.LevelWarn, "prefill failed, decode serves the request alone",
			slog.String("request_id", rc.RequestID), slog.String("reason", f.Reason), slog.String("error", f.Err.Error()))
	}
	if err != nil && rc.PD.Done && !rc.PD.DecodeSent {
		c.log.LogAttrs(ctx, slog.LevelInfo, "request ended between prefill and decode; the prefill worker's timeout frees its KV blocks",
			slog.String("request_id", rc.RequestID))
	}
}

package service

import (
	"context"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/tokens"
	"github.com/coordinator-project/coordinator/steps"
)

// versionCheck is the check of a tokens answer after P/D: the weight
// version that sampled its first token (the decode worker's) against the
// one that sampled the prefill's token. A mismatch means the KV cache one
// version computed was decoded by another (a weight update fell between
// the legs); it is counted in coordinator_weight_version_mismatches_total
// and, under pipeline.version_policy "consistent", ends the answer with
// UNAVAILABLE naming both versions (retryable: the next attempt prefills
// on the current weights). Under "any" the answer goes on: the client has
// the decode's versions in the answer and the prefill's in the
// x-prefill-weight-version header.
func (c *Coordinator) versionCheck(ctx context.Context, rc *steps.RequestContext) tokens.VersionCheck {
	return func(decode string) error {
		prefill := rc.PD.Answer.WeightVersion
		if !rc.PD.Done || prefill == "" || decode == "" || prefill == decode {
			return nil
		}
		c.metrics.WeightVersionMismatch(c.versionPolicy)
		c.log.InfoContext(ctx, "weight versions of prefill and decode differ", "request_id", rc.RequestID,
			"prefill_version", prefill, "decode_version", decode, "policy", c.versionPolicy)
		if c.versionPolicy != config.VersionPolicyConsistent {
			return nil
		}
		return versionMismatch(prefill, decode, rc.RequestID)
	}
}

// versionMismatch is the status of an answer refused under the
// "consistent" policy: UNAVAILABLE with an ErrorInfo naming both versions
// and a RetryInfo.
func versionMismatch(prefill, decode, requestID string) error {
	st := status.New(codes.Unavailable, fmt.Sprintf(
		"the prefill ran on weights %q and the decode on %q (pipeline.version_policy consistent): retry, the next attempt prefills on the current weights (request_id: %s)",
		prefill, decode, requestID))
	with, err := st.WithDetails(
		&errdetails.ErrorInfo{Reason: "WEIGHT_VERSION_MISMATCH", Domain: "coordinator", Metadata: map[string]string{"prefill_version": prefill, "decode_version": decode}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(0)},
	)
	if err != nil {
		return st.Err()
	}
	return with.Err()
}

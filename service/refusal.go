package service

import (
	"errors"

	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/steps"
)

// refuse answers a step's refusal. When err carries a *steps.Refusal (a
// step ended the pipeline with an error answer of its own), the refusal,
// framed as the OpenAI error object, goes to the request's sink as a whole
// answer, as a worker's would: gRPC gets an OpenAIResponse with the
// refusal's status, REST that status and body; refuse then returns what the
// sink returned. A stream's messages have no status, so a stream's refusal
// is returned as the call's error instead, carrying the framed answer
// (apierror.RefusalStatus): REST clients get the refusal's status and body,
// gRPC clients its code. Any other err is returned as is.
func refuse(rc *steps.RequestContext, err error) error {
	var r *steps.Refusal
	if !errors.As(err, &r) {
		return err
	}
	if rc.Stream {
		return apierror.RefusalStatus(r, lastRun(rc.Timings), rc.RequestID).Err()
	}
	a := apierror.RefusalAnswer(r)
	return rc.Sink.Response(a.Status, a.ContentType, a.Body)
}

// lastRun names the last step that ran (the one that refused): the steps
// after it are timed as skipped.
func lastRun(timings []steps.Timing) string {
	for i := len(timings) - 1; i >= 0; i-- {
		if timings[i].Outcome != steps.OutcomeSkipped {
			return timings[i].Step
		}
	}
	return ""
}

// answerOf is a request store's answer as the client receives it: a
// refusal framed, any other answer as is.
func answerOf(a steps.Answer) steps.Answer {
	if a.Refusal != nil {
		return apierror.RefusalAnswer(a.Refusal)
	}
	return a
}

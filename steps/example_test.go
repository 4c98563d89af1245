package steps_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/params"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// The recipe "add a step" of CONTRIBUTING.md: a step is a type with
// Execute, a typed params struct decoded strictly, and a Plugin naming it
// for the config. In the tree it is one file, steps/builtin/<name>.go,
// and one line in builtin.Module: steps.AsPlugin(NewFixedAnswerPlugin).

// FixedAnswerType is the fixed-answer step's config name.
const FixedAnswerType = "fixed-answer"

// FixedAnswer answers every request with a fixed message and ends the
// pipeline: no worker is asked.
type FixedAnswer struct {
	message string
}

// fixedAnswerParams are the fixed-answer step's params.
type fixedAnswerParams struct {
	// Message is the answer's "message" (default "hello").
	Message string `param:"message"`
}

// NewFixedAnswerPlugin registers the fixed-answer step type. The builder
// calls New once per occurrence of the type in pipeline.steps, at startup.
func NewFixedAnswerPlugin() steps.Plugin {
	return steps.Plugin{Type: FixedAnswerType, New: func(raw map[string]any) (steps.Step, error) {
		p := fixedAnswerParams{Message: "hello"} // defaults first
		if err := params.Decode(raw, &p); err != nil {
			return nil, err
		}
		if p.Message == "" {
			return nil, errors.New("message: must not be empty")
		}
		return &FixedAnswer{message: p.Message}, nil
	}}
}

// Execute implements steps.Step: it writes the whole answer through the
// Sink and returns ErrDone, so no later step runs.
func (f *FixedAnswer) Execute(_ context.Context, rc *steps.RequestContext) error {
	body := []byte(`{"model":`)
	body = jsonbody.AppendString(body, rc.Model)
	body = append(body, `,"message":`...)
	body = jsonbody.AppendString(body, f.message)
	body = append(body, '}')
	if err := rc.Sink.Response(http.StatusOK, "application/json", body); err != nil {
		return fmt.Errorf("%s: %w", FixedAnswerType, err)
	}
	return steps.ErrDone
}

var _ steps.Step = (*FixedAnswer)(nil)

// Example_addAStep builds a pipeline from the step's Plugin and a config
// naming it twice, as the app does from pipeline.steps, runs one request
// through it and prints what the client got: the first occurrence
// answers, the second is never reached. A bad config fails at the build,
// naming the step and the key.
func Example_addAStep() {
	plugins := []steps.Plugin{NewFixedAnswerPlugin()}
	p, err := steps.NewPipeline(plugins, []steps.StepConfig{
		{Type: FixedAnswerType, Params: map[string]any{"message": "hi from the coordinator"}},
		{Type: FixedAnswerType, Params: map[string]any{"message": "never sent: ErrDone ended the run"}},
	}, steps.Defaults{})
	if err != nil {
		fmt.Println(err)
		return
	}
	sink := &steptest.Sink{}
	rc := &steps.RequestContext{
		RequestID: "req-1",
		Format:    legs.FormatChat,
		Body:      []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`),
		Model:     "m",
		Sink:      sink,
	}
	fmt.Println("run:", p.Run(context.Background(), rc))
	fmt.Println("answer:", sink.Status, sink.ContentType, string(sink.Body))
	for _, t := range rc.Timings {
		fmt.Println("timing:", t.Step, t.Outcome)
	}

	_, err = steps.NewPipeline(plugins, []steps.StepConfig{{Type: FixedAnswerType, Params: map[string]any{"mesage": "typo"}}}, steps.Defaults{})
	fmt.Println(err)
	_, err = steps.NewPipeline(plugins, []steps.StepConfig{{Type: FixedAnswerType}, {Type: "decode"}}, steps.Defaults{})
	fmt.Println(err)
	// Output:
	// run: <nil>
	// answer: 200 application/json {"model":"m","message":"hi from the coordinator"}
	// timing: fixed-answer done-early
	// timing: fixed-answer skipped
	// pipeline.steps[0] (fixed-answer): unknown key "mesage" (known: message)
	// pipeline.steps[1]: unknown step type: decode (known: fixed-answer)
}

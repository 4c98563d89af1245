package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/sim"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// Compat D23: the coordinator owns kv_transfer_params and
// ec_transfer_params. A client's own, here pointing a decode worker's KV
// pull at a host of the client's choosing, never reach a worker.

// clientParams is what a hostile client sets; evilHost marks it on a leg.
const (
	evilHost     = "evil.example"
	clientParams = `{"remote_host":"evil.example","remote_port":7,"remote_block_ids":[7],"remote_engine_id":"evil","do_remote_prefill":true}`
)

// transferCase is one endpoint's request carrying client transfer params
// everywhere a worker would read them, and the body the decode leg gets
// when no prefill ran (the client's bytes less those params).
type transferCase struct {
	endpoint coordinatorv1.Endpoint
	path     string
	body     string
	clean    string
	// without are the legs the endpoint never runs (docs/responses-messages.md).
	without []string
}

// runs is the pipeline's gateway legs that c's endpoint runs.
func (c transferCase) runs(profiles []string) []string {
	var out []string
	for _, p := range profiles {
		if !slices.Contains(c.without, p) {
			out = append(out, p)
		}
	}
	return out
}

func transferCases(image bool) []transferCase {
	content := `"Tell me about transfer params"`
	if image {
		content = `[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"` + imageURL + `"}}]`
	}
	chat := `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":` + content + `}]`
	messagesContent := `"Tell me about transfer params"`
	if image {
		messagesContent = `[{"type":"text","text":"What is this?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` +
			strings.TrimPrefix(imageURL, "data:image/png;base64,") + `"}}]`
	}
	messages := `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":` + messagesContent + `}]`
	cases := []transferCase{{
		endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, path: "/v1/chat/completions",
		body:  chat + `,"kv_transfer_params":` + clientParams + `,"ec_transfer_params":` + clientParams + `,"vllm_xargs":{"note":"kept","kv_transfer_params":` + clientParams + `}}`,
		clean: chat + `,"vllm_xargs":{"note":"kept"}}`,
	}, {
		endpoint: coordinatorv1.Endpoint_ENDPOINT_MESSAGES, path: "/v1/messages", without: []string{"encode"},
		body:  messages + `,"kv_transfer_params":` + clientParams + `,"ec_transfer_params":` + clientParams + `}`,
		clean: messages + `}`,
	}}
	if image {
		return cases
	}
	responses := `{"model":"sim-model","max_output_tokens":3,"store":false,"input":"Tell me about transfer params"`
	completions := `{"model":"sim-model","max_tokens":3,"prompt":"Tell me about transfer params"`
	generate := `{"model":"sim-model","token_ids":[11,12,13,14,15,16,17,18],"sampling_params":{"max_tokens":3,"extra_args":{"note":"kept","kv_transfer_params":` + clientParams + `,"ec_transfer_params":` + clientParams + `}}`
	return append(cases,
		transferCase{
			endpoint: coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS, path: "/v1/completions",
			body:  completions + `,"vllm_xargs":{"ec_transfer_params":` + clientParams + `},"kv_transfer_params":` + clientParams + `}`,
			clean: completions + `,"vllm_xargs":{}}`,
		},
		transferCase{
			endpoint: coordinatorv1.Endpoint_ENDPOINT_GENERATE, path: "/inference/v1/generate",
			body:  generate + `,"kv_transfer_params":` + clientParams + `}`,
			clean: `{"model":"sim-model","token_ids":[11,12,13,14,15,16,17,18],"sampling_params":{"max_tokens":3,"extra_args":{"note":"kept"}}}`,
		},
		transferCase{
			endpoint: coordinatorv1.Endpoint_ENDPOINT_RESPONSES, path: "/v1/responses", without: []string{"encode", "prefill"},
			body:  responses + `,"kv_transfer_params":` + clientParams + `,"vllm_xargs":{"ec_transfer_params":` + clientParams + `}}`,
			clean: responses + `,"vllm_xargs":{}}`,
		})
}

// send sends c over REST or gRPC (Generate) with request id id and
// returns the status (HTTP, or 200 for a gRPC OK) and the answer.
func (s *stack) sendTransferCase(t *testing.T, api string, c transferCase, id string) (int, string) {
	t.Helper()
	if api == "rest" {
		resp := s.post(t, c.path, c.body, http.Header{"X-Request-Id": {id}})
		return resp.StatusCode, readAll(t, resp.Body)
	}
	out, err := coordinatorv1.NewCoordinatorServiceClient(s.conn).Generate(context.Background(), &coordinatorv1.GenerateRequest{
		RequestId: id, Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: c.endpoint, Json: []byte(c.body)}},
	})
	require.NoError(t, err)
	return int(out.GetOpenai().GetStatusCode()), string(out.GetOpenai().GetJson())
}

func TestClientTransferParamsNeverReachAWorker(t *testing.T) {
	t.Parallel()
	pipelines := []struct {
		name, yaml string
		image      bool
		profiles   []string // the gateway legs each request makes
	}{
		{name: "decode-only", yaml: decodeOnly, profiles: []string{"decode"}},
		{name: "P/D kv-nixl", yaml: fmt.Sprintf(pdDisaggregated, true), profiles: []string{"prefill", "decode"}},
		{name: "E/P/D with an image", yaml: mediaPipeline, image: true, profiles: []string{"encode", "prefill", "decode"}},
	}
	for _, p := range pipelines {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			s, gw, render := startSim(t, sim.Options{Strict: true})
			st := startStack(t, gw, render, p.yaml)
			for _, c := range transferCases(p.image) {
				for _, api := range []string{"rest", "grpc"} {
					id := strings.ReplaceAll(fmt.Sprintf("d23-%s-%s", api, c.path), "/", "-")
					code, answer := st.sendTransferCase(t, api, c, id)
					require.Equal(t, http.StatusOK, code, answer)
					var profiles []string
					for _, l := range s.Legs() {
						if !headers.IsLegRequestID(l.Header.Get("X-Request-Id"), id) {
							continue
						}
						assert.NotContains(t, string(l.Body), evilHost, "%s %s leg %s carries the client's transfer params", api, c.path, l.Profile)
						if l.Service == sim.ServiceGateway {
							profiles = append(profiles, l.Profile)
						}
						if p.name == "decode-only" {
							assert.Equal(t, c.clean, string(l.Body), "%s %s: the decode leg is the client's bytes less its transfer params", api, c.path)
						}
					}
					assert.Equal(t, c.runs(p.profiles), profiles, "%s %s", api, c.path)
				}
			}
		})
	}
}

// recordingGateway answers every leg with a small chat answer and keeps
// each leg's body.
func recordingGateway(t *testing.T) *steptest.Gateway {
	return steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}]}`)
	})
}

// transferEndpoints are the endpoint labels of transferCases(false).
var transferEndpoints = []string{"chat", "messages", "completions", "generate", "responses"}

func TestClientTransferParamsDroppedAreCountedAndLogged(t *testing.T) {
	t.Parallel()
	gw := recordingGateway(t)
	logs := &syncBuffer{}
	st := startStackLogged(t, nil, logs, gw.URL, "", decodeOnly)
	before := map[string]string{}
	series := func(api, endpoint string) string {
		return fmt.Sprintf(`coordinator_client_transfer_params_dropped_total{api=%q,endpoint=%q}`, api, endpoint)
	}
	for _, api := range []string{"rest", "grpc"} {
		for _, ep := range transferEndpoints {
			before[series(api, ep)] = st.scrape(t, series(api, ep))
			assert.Equal(t, "0", before[series(api, ep)], "the series exist from the start")
		}
	}

	for _, c := range transferCases(false) {
		for _, api := range []string{"rest", "grpc"} {
			code, answer := st.sendTransferCase(t, api, c, "count-"+api)
			require.Equal(t, http.StatusOK, code, answer)
		}
	}
	clean := `{"model":"sim-model","messages":[{"role":"user","content":"no params"}],"vllm_xargs":{"a":1}}`
	resp := st.post(t, "/v1/chat/completions", clean, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))

	for _, api := range []string{"rest", "grpc"} {
		for _, ep := range transferEndpoints {
			assert.Equal(t, "1", st.scrape(t, series(api, ep)), "%s %s: one request carried params", api, ep)
		}
	}
	assert.Equal(t, 2*len(transferEndpoints), strings.Count(logs.String(), `"msg":"client transfer params dropped"`), "each such request is logged once:\n%s", logs)
	assert.Contains(t, logs.String(), `"keys":["kv_transfer_params","ec_transfer_params","vllm_xargs.kv_transfer_params"]`)
	legs := gw.Legs()
	assert.Equal(t, clean, string(legs[len(legs)-1].Body), "a request without client params goes as it came")
}

func TestPassthroughDropsClientTransferParams(t *testing.T) {
	t.Parallel()
	gw := recordingGateway(t)
	st := startStack(t, gw.URL, "", decodeOnly)
	body := `{"model":"sim-model","input":"hi","kv_transfer_params":` + clientParams + `,"vllm_xargs":{"kv_transfer_params":` + clientParams + `}}`
	resp := st.post(t, "/v1/embeddings", body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	// Not JSON: relayed as it came, whatever it says.
	req, err := http.NewRequest(http.MethodPost, st.restURL+"/v1/audio/transcriptions", strings.NewReader(`kv_transfer_params=`+evilHost))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	form, err := st.client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, form.Body)
	form.Body.Close()

	legs := gw.Legs()
	require.Len(t, legs, 2)
	assert.Equal(t, `{"model":"sim-model","input":"hi","vllm_xargs":{}}`, string(legs[0].Body))
	assert.Equal(t, `kv_transfer_params=`+evilHost, string(legs[1].Body))
	assert.Equal(t, "1", st.scrape(t, `coordinator_client_transfer_params_dropped_total{api="rest",endpoint="passthrough"}`))
}

func TestTrustClientTransferParamsRestoresPassThrough(t *testing.T) {
	t.Parallel()
	gw := recordingGateway(t)
	st := startStackEnv(t, map[string]string{"COORDINATOR_SERVER_TRUST_CLIENT_TRANSFER_PARAMS": "true"}, gw.URL, "", decodeOnly)
	for _, c := range transferCases(false) {
		for _, api := range []string{"rest", "grpc"} {
			code, answer := st.sendTransferCase(t, api, c, "trust-"+api)
			require.Equal(t, http.StatusOK, code, answer)
			legs := gw.Legs()
			assert.Equal(t, c.body, string(legs[len(legs)-1].Body), "%s %s: the client's bytes, params included", api, c.path)
		}
	}
	passthrough := `{"input":"hi","kv_transfer_params":` + clientParams + `}`
	resp := st.post(t, "/v1/embeddings", passthrough, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	legs := gw.Legs()
	assert.Equal(t, passthrough, string(legs[len(legs)-1].Body))
	for _, api := range []string{"rest", "grpc"} {
		assert.Equal(t, "0", st.scrape(t, fmt.Sprintf(`coordinator_client_transfer_params_dropped_total{api=%q,endpoint="chat"}`, api)))
	}
}

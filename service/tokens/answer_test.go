package tokens

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// assertProto compares messages through their JSON form, which diffs well.
func assertProto(t *testing.T, want, got proto.Message) {
	t.Helper()
	if !proto.Equal(want, got) {
		assert.Equal(t, protojson.Format(want), protojson.Format(got))
	}
}

func TestParseTokensResponse(t *testing.T) {
	t.Parallel()
	prompt := []uint32{11, 1 << 31, 13}
	lp := func(id uint32, logprob float32, top ...*coordinatorv1.TopLogprob) *coordinatorv1.TokenLogprob {
		return &coordinatorv1.TokenLogprob{TokenId: id, Logprob: logprob, TopLogprobs: top}
	}
	top := func(id uint32, logprob float32) *coordinatorv1.TopLogprob {
		return &coordinatorv1.TopLogprob{TokenId: id, Logprob: logprob}
	}
	tests := []struct {
		name string
		body string
		want *coordinatorv1.TokensResponse
	}{
		{
			name: "vLLM answer with logprobs",
			body: `{"id":"generate-tokens-r1","created":1,"model":"m","request_id":"r1","choices":[
				{"index":0,"logprobs":{"content":[
					{"token":"token_id:4294967295","logprob":-0.125,"bytes":null,"top_logprobs":[
						{"token":"token_id:4294967295","logprob":-0.125,"bytes":null},{"token":"token_id:7","logprob":-2.5e0,"bytes":null}]},
					{"token":"token_id:2","logprob":-9999.0,"bytes":null,"top_logprobs":[]}]},
				 "finish_reason":"length","token_ids":[4294967295,2],"routed_experts":null}],
				"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":null},
				"prompt_logprobs":null,"kv_transfer_params":null}`,
			want: &coordinatorv1.TokensResponse{
				Choices: []*coordinatorv1.TokensChoice{{
					TokenIds:     []uint32{1<<32 - 1, 2},
					Logprobs:     []*coordinatorv1.TokenLogprob{lp(1<<32-1, -0.125, top(1<<32-1, -0.125), top(7, -2.5)), lp(2, -9999)},
					FinishReason: coordinatorv1.FinishReason_FINISH_REASON_LENGTH,
				}},
				Usage: &coordinatorv1.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5},
			},
		},
		{
			name: "group sampling without logprobs; finish reasons",
			body: `{"choices":[{"index":1,"logprobs":null,"finish_reason":"stop","token_ids":[5]},
				{"index":0,"finish_reason":"abort","token_ids":[]},
				{"index":2,"finish_reason":"repetition","token_ids":[6,6]}],"usage":null}`,
			want: &coordinatorv1.TokensResponse{Choices: []*coordinatorv1.TokensChoice{
				{Index: 1, TokenIds: []uint32{5}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_STOP},
				{Index: 0, TokenIds: []uint32{}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_ABORT},
				{Index: 2, TokenIds: []uint32{6, 6}},
			}},
		},
		{
			name: "prompt logprobs: one per prompt token, the first null",
			body: `{"choices":[{"index":0,"token_ids":[1],"finish_reason":"length"}],
				"prompt_logprobs":[null,
					{"2147483648":{"logprob":-3.5,"rank":4,"decoded_token":null},"99":{"logprob":-0.5,"rank":1,"decoded_token":null}},
					{"13":{"logprob":-0.25,"rank":1,"decoded_token":"token_id:13"}}]}`,
			want: &coordinatorv1.TokensResponse{
				Choices: []*coordinatorv1.TokensChoice{{TokenIds: []uint32{1}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_LENGTH}},
				PromptLogprobs: []*coordinatorv1.PromptLogprob{
					{TokenId: 11},
					{TokenId: 1 << 31, Logprob: proto.Float32(-3.5), TopLogprobs: []*coordinatorv1.TopLogprob{top(1<<31, -3.5), top(99, -0.5)}},
					{TokenId: 13, Logprob: proto.Float32(-0.25), TopLogprobs: []*coordinatorv1.TopLogprob{top(13, -0.25)}},
				},
			},
		},
		{
			name: "cached tokens",
			body: `{"choices":[{"index":0,"token_ids":[1],"finish_reason":"length"}],
				"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4,"prompt_tokens_details":{"cached_tokens":2}}}`,
			want: &coordinatorv1.TokensResponse{
				Choices: []*coordinatorv1.TokensChoice{{TokenIds: []uint32{1}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_LENGTH}},
				Usage:   &coordinatorv1.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4, CachedTokens: proto.Uint32(2)},
			},
		},
		{
			name: "details without a count",
			body: `{"choices":[],"usage":{"prompt_tokens":3,"prompt_tokens_details":{}}}`,
			want: &coordinatorv1.TokensResponse{Choices: []*coordinatorv1.TokensChoice{}, Usage: &coordinatorv1.Usage{PromptTokens: 3}},
		},
		{
			name: "weight versions: a weight update in the middle of one choice",
			body: `{"choices":[{"index":0,"token_ids":[1,2,3],"finish_reason":"length",
					"weight_versions":[{"version":"v1","start":0,"end":2},{"version":"step-\u00e9 2","start":2,"end":3}]},
				{"index":1,"token_ids":[4,5],"finish_reason":"length","weight_versions":[{"end":2,"start":0,"version":"v1","extra":null}]}]}`,
			want: &coordinatorv1.TokensResponse{Choices: []*coordinatorv1.TokensChoice{
				{TokenIds: []uint32{1, 2, 3}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_LENGTH,
					WeightVersions: []*coordinatorv1.WeightVersionSpan{{Version: "v1", Start: 0, Count: 2}, {Version: "step-é 2", Start: 2, Count: 1}}},
				{Index: 1, TokenIds: []uint32{4, 5}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_LENGTH,
					WeightVersions: []*coordinatorv1.WeightVersionSpan{{Version: "v1", Count: 2}}},
			}},
		},
		{
			name: "weight versions absent, null or empty",
			body: `{"choices":[{"index":0,"token_ids":[1]},{"index":1,"token_ids":[2],"weight_versions":null},
				{"index":2,"token_ids":[],"finish_reason":"abort","weight_versions":[]}]}`,
			want: &coordinatorv1.TokensResponse{Choices: []*coordinatorv1.TokensChoice{
				{TokenIds: []uint32{1}}, {Index: 1, TokenIds: []uint32{2}},
				{Index: 2, TokenIds: []uint32{}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_ABORT},
			}},
		},
		{
			name: "escaped token spelling",
			body: `{"choices":[{"index":0,"token_ids":[5],"logprobs":{"content":[{"token":"token_id\u003a5","logprob":-1}]}}]}`,
			want: &coordinatorv1.TokensResponse{Choices: []*coordinatorv1.TokensChoice{{TokenIds: []uint32{5}, Logprobs: []*coordinatorv1.TokenLogprob{lp(5, -1)}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseTokensResponse([]byte(tt.body), prompt)
			require.NoError(t, err)
			assertProto(t, tt.want, got)
		})
	}
}

func TestParseTokensResponseRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, err string
	}{
		{name: "not JSON", body: `data: {}`, err: "decode answer: invalid character"},
		{name: "not an object", body: `[1]`, err: "decode answer: json: cannot unmarshal array"},
		{name: "no choices", body: `{"usage":null}`, err: "no choices"},
		{name: "choices not an array", body: `{"choices":{}}`, err: "choices"},
		{name: "token_ids not integers", body: `{"choices":[{"token_ids":[1.5]}]}`, err: "choices.token_ids"},
		{name: "negative token ID", body: `{"choices":[{"token_ids":[-1]}]}`, err: "choices.token_ids"},
		{name: "token ID over 32 bits", body: `{"choices":[{"token_ids":[4294967296]}]}`, err: "choices.token_ids"},
		{name: "bad index", body: `{"choices":[{"index":-1,"token_ids":[]}]}`, err: "choices.index"},
		{name: "finish reason not a string", body: `{"choices":[{"token_ids":[1],"finish_reason":1}]}`, err: "finish_reason: not a string"},
		{name: "logprobs for fewer tokens", body: `{"choices":[{"token_ids":[1,2],"logprobs":{"content":[{"token":"token_id:1","logprob":-1}]}}]}`,
			err: "choices[0].logprobs.content: 1 entries for 2 tokens"},
		{name: "token spelled as text", body: `{"choices":[{"token_ids":[1],"logprobs":{"content":[{"token":"hello","logprob":-1}]}}]}`,
			err: `token: not "token_id:<id>"`},
		{name: "token ID with sign", body: `{"choices":[{"token_ids":[1],"logprobs":{"content":[{"token":"token_id:-1","logprob":-1}]}}]}`,
			err: `token: not "token_id:<id>"`},
		{name: "logprob not a number", body: `{"choices":[{"token_ids":[1],"logprobs":{"content":[{"token":"token_id:1","logprob":"x"}]}}]}`,
			err: "choices.logprobs.content.logprob"},
		{name: "bad top logprob", body: `{"choices":[{"token_ids":[1],"logprobs":{"content":[{"token":"token_id:1","logprob":-1,"top_logprobs":[{"token":"token_id:x","logprob":-1}]}]}}]}`,
			err: `token: not "token_id:<id>"`},
		{name: "more weight spans than tokens", body: `{"choices":[{"token_ids":[1],"weight_versions":[{"version":"v1","start":0,"end":1},{"version":"v2","start":1,"end":1}]}]}`,
			err: "choices[0].weight_versions: 2 spans for 1 tokens"},
		{name: "weight spans without tokens", body: `{"choices":[{"token_ids":[],"weight_versions":[{"version":"v1","start":0,"end":0}]}]}`,
			err: "choices[0].weight_versions: 1 spans for 0 tokens"},
		{name: "weight span negative", body: `{"choices":[{"token_ids":[1],"weight_versions":[{"version":"v1","start":-1,"end":1}]}]}`,
			err: "choices[0].weight_versions[0]: negative start -1"},
		{name: "weight span inverted", body: `{"choices":[{"token_ids":[1,2],"weight_versions":[{"version":"v1","start":0,"end":1},{"version":"v2","start":2,"end":1}]}]}`,
			err: "choices[0].weight_versions[1]: end 1 before start 2"},
		{name: "weight span past 32 bits", body: `{"choices":[{"token_ids":[1],"weight_versions":[{"version":"v1","start":0,"end":4294967296}]}]}`,
			err: "choices[0].weight_versions[0]: end 4294967296 past 32 bits"},
		{name: "weight span bound not an integer", body: `{"choices":[{"token_ids":[1],"weight_versions":[{"version":"v1","start":0,"end":1.5}]}]}`,
			err: "choices.weight_versions.end"},
		{name: "weight version a number", body: `{"choices":[{"token_ids":[1],"weight_versions":[{"version":2,"start":0,"end":1}]}]}`,
			err: "choices.weight_versions.version"},
		{name: "weight version null", body: `{"choices":[{"token_ids":[1],"weight_versions":[{"version":null,"start":0,"end":1}]}]}`,
			err: "choices[0].weight_versions[0]: version not a string"},
		{name: "weight version missing", body: `{"choices":[{"token_ids":[1],"weight_versions":[{"start":0,"end":1}]}]}`,
			err: "choices[0].weight_versions[0]: version not a string"},
		{name: "weight versions not a list", body: `{"choices":[{"token_ids":[1],"weight_versions":{"version":"v1","start":0,"end":1}}]}`,
			err: "choices.weight_versions"},
		{name: "usage not counts", body: `{"choices":[],"usage":{"prompt_tokens":-3}}`, err: "usage.prompt_tokens"},
		{name: "prompt logprobs for another prompt", body: `{"choices":[],"prompt_logprobs":[null]}`, err: "prompt_logprobs: 1 entries for 3 prompt tokens"},
		{name: "prompt logprobs key not an ID", body: `{"choices":[],"prompt_logprobs":[null,{"a":{"logprob":-1}},null]}`, err: `prompt_logprobs[1]: key "a"`},
		{name: "prompt logprob missing", body: `{"choices":[],"prompt_logprobs":[null,{"5":{"rank":1}},null]}`, err: `prompt_logprobs[1]["5"]: no logprob`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseTokensResponse([]byte(tt.body), []uint32{1, 2, 3})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
			_, isUpstream := errors.AsType[*gateway.StatusError](err)
			assert.False(t, isUpstream, "a malformed answer is the coordinator's problem (Internal)")
		})
	}
}

func TestWorkerErrorObjects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		status     int
	}{
		{name: "error member", body: `{"error":{"message":"boom","type":"BadRequestError","code":400}}`, status: 400},
		{name: "vLLM's older ErrorResponse", body: `{"object":"error","message":"boom","code":503}`, status: 503},
		{name: "no usable code", body: `{"error":{"message":"boom","code":"x"}}`, status: 500},
		{name: "error not an object", body: `{"error":"boom"}`, status: 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, parse := range []func([]byte) error{
				func(b []byte) error { _, err := parseTokensResponse(b, nil); return err },
				func(b []byte) error {
					return mergeStreamEvent(&coordinatorv1.TokensChunk{}, b, newTestChoice, &scratch{}, outputCounts{})
				},
			} {
				se, ok := errors.AsType[*gateway.StatusError](parse([]byte(tt.body)))
				require.True(t, ok)
				assert.Equal(t, "decode", se.Leg)
				assert.Equal(t, tt.status, se.StatusCode)
				assert.Equal(t, tt.body, string(se.Body))
				assert.True(t, se.Relay)
			}
		})
	}
}

func newTestChoice() *coordinatorv1.TokensChoice { return &coordinatorv1.TokensChoice{} }

func TestMergeStreamEvent(t *testing.T) {
	t.Parallel()
	events := []string{
		`{"request_id":"r","choices":[{"index":0,"logprobs":{"content":[{"token":"token_id:5","logprob":-1,"top_logprobs":[]}]},"finish_reason":null,"token_ids":[5]}]}`,
		`{"request_id":"r","choices":[{"index":1,"logprobs":{"content":[{"token":"token_id:8","logprob":-2,"top_logprobs":[]}]},"finish_reason":null,"token_ids":[8]}]}`,
		`{"request_id":"r","choices":[{"index":0,"logprobs":{"content":[{"token":"token_id:6","logprob":-3,"top_logprobs":[]}]},"finish_reason":"length","token_ids":[6],` +
			`"weight_versions":[{"version":"v1","start":0,"end":1},{"version":"v2","start":1,"end":2}]}]}`,
		`{"request_id":"r","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7}}`,
	}
	var chunk coordinatorv1.TokensChunk
	var sc scratch
	outputs := outputCounts{}
	for _, e := range events {
		require.NoError(t, mergeStreamEvent(&chunk, []byte(e), newTestChoice, &sc, outputs))
	}
	assertProto(t, &coordinatorv1.TokensChunk{
		Choices: []*coordinatorv1.TokensChoice{
			{Index: 0, TokenIds: []uint32{5, 6}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_LENGTH,
				Logprobs:       []*coordinatorv1.TokenLogprob{{TokenId: 5, Logprob: -1}, {TokenId: 6, Logprob: -3}},
				WeightVersions: []*coordinatorv1.WeightVersionSpan{{Version: "v1", Count: 1}, {Version: "v2", Start: 1, Count: 1}}},
			{Index: 1, TokenIds: []uint32{8}, Logprobs: []*coordinatorv1.TokenLogprob{{TokenId: 8, Logprob: -2}}},
		},
		Usage: &coordinatorv1.Usage{PromptTokens: 4, CompletionTokens: 3, TotalTokens: 7},
	}, &chunk)

	err := mergeStreamEvent(&chunk, []byte(`{"choices":[{"index":0,"token_ids":[1,2],"logprobs":{"content":[]}}]}`), newTestChoice, &scratch{}, outputCounts{})
	assert.ErrorContains(t, err, "decode event: choices[0].logprobs.content: 0 entries for 2 tokens")
	err = mergeStreamEvent(&chunk, []byte(`{"choices":[{"index":0,"token_ids":[1,2],"logprobs":{"content":null}}]}`), newTestChoice, &scratch{}, outputCounts{})
	assert.NoError(t, err, "content null: no logprobs")
	assert.ErrorContains(t, mergeStreamEvent(&chunk, []byte(`{"choices":`), newTestChoice, &scratch{}, outputCounts{}), "decode event")
}

func TestTokenID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw  string
		want uint32
		ok   bool
	}{
		{raw: `"token_id:0"`, want: 0, ok: true},
		{raw: `"token_id:4294967295"`, want: 1<<32 - 1, ok: true},
		{raw: `"token_id:2147483648"`, want: 1 << 31, ok: true},
		{raw: `"token_id\u003a12"`, want: 12, ok: true},
		{raw: `"token_id:4294967296"`},
		{raw: `"token_id:01"`},
		{raw: `"token_id:"`},
		{raw: `"token_id:1 "`},
		{raw: `"token_id:+1"`},
		{raw: `"Hello"`},
		{raw: `12`},
		{raw: ``},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			t.Parallel()
			got, err := tokenID([]byte(tt.raw))
			if !tt.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// streamEvent is a vLLM GenerateStreamResponse event of one token with k
// top logprobs, as a decode worker sends it.
func streamEvent(k int) []byte {
	var top []string
	for i := range k {
		top = append(top, fmt.Sprintf(`{"token":"token_id:%d","logprob":-%d.%03d,"bytes":null}`, 151000+i*37, i+1, i*7%1000))
	}
	lp := "null"
	if k >= 0 {
		lp = `{"content":[{"token":"token_id:151643","logprob":-0.123,"bytes":null,"top_logprobs":[` + strings.Join(top, ",") + `]}]}`
	}
	return []byte(`{"request_id":"generate-tokens-0b8f2c6e-3f4d-4c55-9e0a-7d1b2c3d4e5f","choices":[{"index":0,"logprobs":` + lp +
		`,"finish_reason":null,"token_ids":[151643],"routed_experts":null}]}`)
}

// mergeJSONBodyEvent is the internal/jsonbody alternative to
// mergeStreamEvent (its happy path only), kept to measure against: each
// nested ParseObject/ParseArray validates its subtree again.
func mergeJSONBodyEvent(chunk *coordinatorv1.TokensChunk, data []byte) error {
	obj, err := jsonbody.ParseObject(data)
	if err != nil {
		return err
	}
	raw, _ := obj.Get("choices")
	choices, err := jsonbody.ParseArray(raw)
	if err != nil {
		return err
	}
	for _, rc := range choices {
		co, err := jsonbody.ParseObject(rc)
		if err != nil {
			return err
		}
		raw, _ := co.Get("index")
		index, _ := jsonbody.Int(raw)
		raw, _ = co.Get("token_ids")
		ids, err := jsonbody.Uint32s(raw)
		if err != nil {
			return err
		}
		c := &coordinatorv1.TokensChoice{Index: uint32(index), TokenIds: ids}
		if raw, ok := co.Get("logprobs"); ok && !jsonbody.IsNull(raw) {
			lo, err := jsonbody.ParseObject(raw)
			if err != nil {
				return err
			}
			raw, _ = lo.Get("content")
			content, err := jsonbody.ParseArray(raw)
			if err != nil {
				return err
			}
			for _, re := range content {
				lp, top, err := jsonBodyLogprob(re)
				if err != nil {
					return err
				}
				e := &coordinatorv1.TokenLogprob{TokenId: lp.TokenId, Logprob: lp.Logprob}
				for _, rt := range top {
					t, _, err := jsonBodyLogprob(rt)
					if err != nil {
						return err
					}
					e.TopLogprobs = append(e.TopLogprobs, t)
				}
				c.Logprobs = append(c.Logprobs, e)
			}
		}
		chunk.Choices = append(chunk.Choices, c)
	}
	return nil
}

// jsonBodyLogprob reads {"token", "logprob", "top_logprobs"}.
func jsonBodyLogprob(raw []byte) (*coordinatorv1.TopLogprob, [][]byte, error) {
	o, err := jsonbody.ParseObject(raw)
	if err != nil {
		return nil, nil, err
	}
	tok, _ := o.Get("token")
	id, err := tokenID(tok)
	if err != nil {
		return nil, nil, err
	}
	num, _ := o.Get("logprob")
	lp, err := strconv.ParseFloat(string(num), 32)
	if err != nil {
		return nil, nil, err
	}
	var top [][]byte
	if raw, ok := o.Get("top_logprobs"); ok {
		if top, err = jsonbody.ParseArray(raw); err != nil {
			return nil, nil, err
		}
	}
	return &coordinatorv1.TopLogprob{TokenId: id, Logprob: float32(lp)}, top, nil
}

func TestJSONBodyEventAgrees(t *testing.T) {
	t.Parallel()
	for _, k := range []int{-1, 0, 1, 20} {
		var a, b coordinatorv1.TokensChunk
		require.NoError(t, mergeStreamEvent(&a, streamEvent(k), newTestChoice, &scratch{}, outputCounts{}))
		require.NoError(t, mergeJSONBodyEvent(&b, streamEvent(k)))
		assertProto(t, &b, &a)
	}
}

// BenchmarkStreamEvent is the cost of turning one decode worker event into
// the chunk's choices: what the sink does (fastAnswer, then the merge)
// against decoding the event with encoding/json alone and walking it with
// internal/jsonbody, and the protobuf marshalling that follows.
func BenchmarkStreamEvent(b *testing.B) {
	for _, k := range []int{-1, 0, 1, 5, 20} {
		data := streamEvent(k)
		name := fmt.Sprintf("logprobs=%d", k)
		if k < 0 {
			name = "logprobs=none"
		}
		b.Run(name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				var a generateAnswer
				if err := json.Unmarshal(data, &a); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/sink", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			s := &StreamSink{outputs: outputCounts{}}
			for b.Loop() {
				s.chunk.Choices, s.used = s.chunk.Choices[:0], 0
				s.scratch.release()
				if err := mergeStreamEvent(&s.chunk, data, s.takeChoice, &s.scratch, s.outputs); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/jsonbody", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var chunk coordinatorv1.TokensChunk
			for b.Loop() {
				chunk.Choices = chunk.Choices[:0]
				if err := mergeJSONBodyEvent(&chunk, data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/proto-marshal", func(b *testing.B) {
			var chunk coordinatorv1.TokensChunk
			if err := mergeStreamEvent(&chunk, data, newTestChoice, &scratch{}, outputCounts{}); err != nil {
				b.Fatal(err)
			}
			msg := &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Tokens{Tokens: &chunk}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := proto.Marshal(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

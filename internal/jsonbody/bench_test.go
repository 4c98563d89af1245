package jsonbody_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// chatBody returns a realistic chat completion request of about 2 KB.
func chatBody() []byte {
	return []byte(`{
  "model": "meta-llama/Llama-3.1-8B-Instruct",
  "messages": [
    {"role": "system", "content": "You are a helpful assistant. Answer concisely, cite sources when you can, and never invent facts. If a question is ambiguous, ask one clarifying question first."},
    {"role": "user", "content": "What is the difference between prefill and decode in LLM inference, and why would anyone run them on different GPUs?"},
    {"role": "assistant", "content": "Prefill processes the whole prompt at once and is compute-bound; decode generates one token at a time and is memory-bandwidth-bound. Splitting them lets each pool be sized and batched for its own bottleneck.\n\nWould you like numbers?"},
    {"role": "user", "content": "Yes please, with a short \"back of the envelope\" estimate for a 70B model at 4k context. Use \u00b5s where it helps."}
  ],
  "tools": [
    {"type": "function", "function": {"name": "search", "description": "Search the web", "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "integer", "minimum": 1, "maximum": 20}}, "required": ["query"]}}},
    {"type": "function", "function": {"name": "calculator", "description": "Evaluate an arithmetic expression", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}
  ],
  "tool_choice": "auto",
  "max_tokens": 1024,
  "temperature": 0.7,
  "top_p": 0.95,
  "top_k": 50,
  "stream": true,
  "stream_options": {"include_usage": true},
  "ignore_eos": false,
  "stop": ["</s>", "<|eot_id|>"],
  "seed": 1234567,
  "chat_template_kwargs": {"enable_thinking": false},
  "user": "tenant-42/user-0000000000000000000000000000000000000000000000000000000000000",
  "metadata": {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7", "sampled": true}
}`)
}

// imageBody returns a chat request carrying a base64 data-URI image of about
// size bytes.
func imageBody(size int) []byte {
	img := make([]byte, size*3/4)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range img {
		img[i] = byte(r.Uint32())
	}
	return fmt.Appendf(nil, `{"model":"Qwen/Qwen2.5-VL-7B-Instruct","messages":[{"role":"user","content":[`+
		`{"type":"text","text":"Describe this image in detail."},`+
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,%s"}}]}],"max_tokens":256,"stream":false}`,
		base64.StdEncoding.EncodeToString(img))
}

var benchBodies = []struct {
	name string
	body []byte
}{
	{"chat-2KB", chatBody()},
	{"image-1MB", imageBody(1 << 20)},
}

// BenchmarkParseObject compares ParseObject with encoding/json validating and
// decoding the same bodies.
func BenchmarkParseObject(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name+"/ParseObject", func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jsonbody.ParseObject(bb.body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bb.name+"/json.Valid", func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for b.Loop() {
				if !json.Valid(bb.body) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(bb.name+"/json.Unmarshal-map", func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for b.Loop() {
				var m map[string]any
				if err := json.Unmarshal(bb.body, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEdit measures a step's whole job, parse + set two keys +
// serialise, against the map round trip it replaces.
func BenchmarkEdit(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name+"/jsonbody", func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for b.Loop() {
				o, err := jsonbody.ParseObject(bb.body)
				if err != nil {
					b.Fatal(err)
				}
				o.Set("max_tokens", []byte("1"))
				o.Set("kv_transfer_params", []byte(`{"do_remote_decode":true}`))
				_ = o.Bytes()
			}
		})
		b.Run(bb.name+"/jsonbody-reused-buffer", func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			buf := make([]byte, 0, len(bb.body)+64)
			for b.Loop() {
				o, err := jsonbody.ParseObject(bb.body)
				if err != nil {
					b.Fatal(err)
				}
				o.Set("max_tokens", []byte("1"))
				o.Set("kv_transfer_params", []byte(`{"do_remote_decode":true}`))
				buf = o.AppendTo(buf[:0])
			}
		})
		b.Run(bb.name+"/json-map", func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for b.Loop() {
				var m map[string]any
				if err := json.Unmarshal(bb.body, &m); err != nil {
					b.Fatal(err)
				}
				m["max_tokens"] = 1
				m["kv_transfer_params"] = map[string]any{"do_remote_decode": true}
				if _, err := json.Marshal(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUint32s decodes and encodes a 32k-token prompt.
func BenchmarkUint32s(b *testing.B) {
	ids := make([]uint32, 32768)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range ids {
		ids[i] = r.Uint32N(152064)
	}
	raw := jsonbody.AppendUint32s(nil, ids)
	b.Run("Uint32s", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonbody.Uint32s(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			var got []uint32
			if err := json.Unmarshal(raw, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendUint32s", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		buf := make([]byte, 0, len(raw))
		for b.Loop() {
			buf = jsonbody.AppendUint32s(buf[:0], ids)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(ids); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkString unescapes the 1 MB image URL, plain and with every '/'
// escaped as some encoders (PHP, Jackson options) write it.
func BenchmarkString(b *testing.B) {
	o, err := jsonbody.ParseObject(imageBody(1 << 20))
	if err != nil {
		b.Fatal(err)
	}
	msgs, _ := o.Get("messages")
	i := strings.Index(string(msgs), `"data:`)
	j := strings.LastIndex(string(msgs), `"}}`)
	plain := msgs[i : j+1]
	escaped := []byte(strings.ReplaceAll(string(plain), "/", `\/`))
	for _, c := range []struct {
		name string
		raw  []byte
	}{{"plain", plain}, {"escaped-slashes", escaped}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := jsonbody.String(c.raw); !ok {
					b.Fatal("not a string")
				}
			}
		})
	}
}

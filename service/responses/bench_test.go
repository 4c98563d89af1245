package responses_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/service/responses"
)

// BenchmarkContinue50Turns: a request continuing a 50-turn conversation
// of about 200 KB, as the service serves it: Begin (the record read, the
// input rebuilt) and the rebuilt body parsed again.
func BenchmarkContinue50Turns(b *testing.B) {
	s := memoryStore(b, responses.Options{StoreByDefault: true, MaxHistoryBytes: 8 << 20})
	text := strings.Repeat("lorem ipsum dolor sit amet ", 74) // ~2 KB a message
	var items []string
	for i := range 49 {
		items = append(items, fmt.Sprintf(`{"role":"user","content":"%d %s"}`, i, text),
			fmt.Sprintf(`{"id":"msg_%d","type":"message","role":"assistant","content":[{"type":"output_text","text":"%s"}]}`, i, text))
	}
	root, err := jsonbody.ParseObject([]byte(`{"model":"m","input":[` + strings.Join(items, ",") + `]}`))
	require.NoError(b, err)
	turn, _, err := s.Begin(context.Background(), root, "")
	require.NoError(b, err)
	require.NoError(b, turn.Sink(nullSink{}).Response(200, "application/json",
		[]byte(`{"id":"resp_49","output":[{"id":"msg_49","type":"message","role":"assistant","content":[{"type":"output_text","text":"`+text+`"}]}]}`)))
	turn.Finish(context.Background(), discard(), "r")
	body := []byte(`{"model":"m","input":"turn 50","previous_response_id":"resp_49","store":false}`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		doc, err := requestbody.Parse(body, legs.FormatResponses)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.Begin(context.Background(), doc.Root(), ""); err != nil {
			b.Fatal(err)
		}
		if _, err := requestbody.Parse(doc.Bytes(), legs.FormatResponses); err != nil {
			b.Fatal(err)
		}
	}
	// The history's size, to read B/op against (the goal: at most 3x).
	b.ReportMetric(float64(len(root.Bytes())), "history-B")
}

// BenchmarkConversationTurn50: one turn of a 50-turn conversation of
// about 200 KB, as the service serves it: Begin (the conversation read,
// the input rebuilt), the rebuilt body parsed again, and Finish (the
// turn's items appended to the conversation, one atomic rewrite).
func BenchmarkConversationTurn50(b *testing.B) {
	s := memoryStore(b, responses.Options{MaxHistoryBytes: 8 << 20})
	text := strings.Repeat("lorem ipsum dolor sit amet ", 74) // ~2 KB a message
	var items []string
	for i := range 50 {
		items = append(items, fmt.Sprintf(`{"role":"user","content":"%d %s"}`, i, text),
			fmt.Sprintf(`{"id":"msg_%d","type":"message","role":"assistant","content":[{"type":"output_text","text":"%s"}]}`, i, text))
	}
	ctx := context.Background()
	var id string
	for i := 0; i < len(items); i += 20 {
		if i == 0 {
			created, err := s.CreateConversation(ctx, "", []byte(`{"items":[`+strings.Join(items[:20], ",")+`]}`))
			require.NoError(b, err)
			id = string(created[7:44]) // {"id":"conv_<32 hex>"
			continue
		}
		_, err := s.AddConversationItems(ctx, "", id, []byte(`{"items":[`+strings.Join(items[i:min(i+20, len(items))], ",")+`]}`))
		require.NoError(b, err)
	}
	body := []byte(`{"model":"m","input":[{"id":"msg_u51","role":"user","content":"turn 51"}],"conversation":"` + id + `","store":false}`)
	answer := []byte(`{"id":"resp_51","output":[{"id":"msg_51","type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}]}`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		doc, err := requestbody.Parse(body, legs.FormatResponses)
		if err != nil {
			b.Fatal(err)
		}
		turn, _, err := s.Begin(ctx, doc.Root(), "")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := requestbody.Parse(doc.Bytes(), legs.FormatResponses); err != nil {
			b.Fatal(err)
		}
		_ = turn.Sink(nullSink{}).Response(200, "application/json", answer)
		turn.Finish(ctx, discard(), "r")
		b.StopTimer() // every turn starts from the same 100 items
		for _, item := range []string{"msg_u51", "msg_51"} {
			if _, err := s.DeleteConversationItem(ctx, "", id, item); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
}

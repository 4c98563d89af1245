package gateway_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// TestALegSafeToResendSurvivesAKeptConnectionThatDies: the gateway reads
// the second leg on its kept connection and hangs up without a word (its
// idle timeout raced the leg). A leg marked safe to send again goes once
// more on a new connection at once, without the Retry policy (sending
// every leg once here) and without any header saying so; a decode leg,
// which may not go twice, fails, as it would with net/http's Transport.
func TestALegSafeToResendSurvivesAKeptConnectionThatDies(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		retry bool
	}{
		{name: "prefill", retry: true},
		{name: "decode", retry: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			keys := make(chan []string, 3)
			s := startScripted(t, func(n int, w http.ResponseWriter, r *http.Request) {
				keys <- r.Header.Values("Idempotency-Key")
				if n == 1 {
					closeConn(w)
					return
				}
				_, _ = io.WriteString(w, "ok")
			})
			c, err := gateway.New(gateway.Options{Address: s.URL})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			r := prefillLeg(tt.retry)
			body, _, err := postLeg(c, context.Background(), r)
			require.NoError(t, err)
			require.Equal(t, "ok", body)

			body, legs, err := postLeg(c, context.Background(), r)
			if tt.retry {
				require.NoError(t, err)
				assert.Equal(t, "ok", body)
				assert.Equal(t, []string{`{"prompt":"hi"}`, `{"prompt":"hi"}`, `{"prompt":"hi"}`}, s.received())
			} else {
				var te *gateway.TransportError
				require.ErrorAs(t, err, &te)
				assert.Len(t, s.received(), 2, "not sent again")
			}
			require.Len(t, legs, 1, "one attempt of the client's: the transport's resend is not one")
			for seen := false; !seen; {
				select {
				case k := <-keys:
					assert.Empty(t, k, "the mark is not sent")
				default:
					seen = true
				}
			}
		})
	}
}

package ec_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/connectors/ec"
	"github.com/coordinator-project/coordinator/connectors/ec/ectest"
)

const (
	descA  = `{"peer_host":"10.0.0.1","peer_port":5501,"size_bytes":2359296,"nixl_agent_metadata_b64":"TklYTA=="}`
	descB  = `{"peer_host":"10.0.0.2","peer_port":5502,"size_bytes":2359296,"nixl_agent_metadata_b64":"QWdlbnQ="}`
	descA2 = `{"peer_host":"10.0.0.3","peer_port":5501,"size_bytes":2359296,"nixl_agent_metadata_b64":"TklYTA=="}`
)

// answers builds encode answers; "" stands for an encoder that sent none.
func answers(in ...string) []json.RawMessage {
	if in == nil {
		return nil
	}
	out := make([]json.RawMessage, len(in))
	for i, s := range in {
		if s != "" {
			out[i] = json.RawMessage(s)
		}
	}
	return out
}

func TestNIXLContract(t *testing.T) {
	t.Parallel()
	ectest.Contract(t, ec.NewNIXL())
}

func TestNIXLName(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "ec-nixl", ec.NewNIXL().Name())
}

func TestNIXLPrefillParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		fromEncode []string
		want       string // "" means nil
	}{
		{
			name:       "merge one hash per encoder",
			fromEncode: []string{`{"abc123hash":` + descA + `}`, `{"def456hash":` + descB + `}`},
			want:       `{"abc123hash":` + descA + `,"def456hash":` + descB + `}`,
		},
		{
			name:       "contract example answers",
			fromEncode: ectest.EncodeAnswers,
			want:       `{"abc123hash":` + descA + `,"def456hash":` + descB + `}`,
		},
		{
			name:       "multi-key response",
			fromEncode: []string{`{"h1":` + descA + `,"h2":` + descB + `}`, `{"h3":{"peer_port":1}}`},
			want:       `{"h1":` + descA + `,"h2":` + descB + `,"h3":{"peer_port":1}}`,
		},
		{
			name:       "duplicate hash identical descriptor kept once",
			fromEncode: []string{`{"h1":` + descA + `}`, `{"h1":` + descA + `}`},
			want:       `{"h1":` + descA + `}`,
		},
		{
			name: "duplicate hash same value in another spelling kept once",
			fromEncode: []string{
				`{"h1":{"peer_host":"10.0.0.1","peer_port":5501,"ids":[1,2]}}`,
				`{"h1":{ "ids":[1.0, 2], "peer_port":5501, "peer_host":"10.0.0.1" }}`,
			},
			want: `{"h1":{"peer_host":"10.0.0.1","peer_port":5501,"ids":[1,2]}}`,
		},
		{
			name:       "nil inner value dropped",
			fromEncode: []string{`{"h1":null,"h2":` + descB + `}`},
			want:       `{"h2":` + descB + `}`,
		},
		{
			name:       "only nil inner values",
			fromEncode: []string{`{"h1":null}`, `{"h2":null}`},
		},
		{
			name:       "null then descriptor for one hash",
			fromEncode: []string{`{"h1":null}`, `{"h1":` + descA + `}`},
			want:       `{"h1":` + descA + `}`,
		},
		{
			name:       "non-map descriptors pass through",
			fromEncode: []string{`{"h1":"opaque-handle","h2":[1,"2",{"x":null}],"h3":42,"h4":false}`},
			want:       `{"h1":"opaque-handle","h2":[1,"2",{"x":null}],"h3":42,"h4":false}`,
		},
		{
			name:       "empty answers ignored",
			fromEncode: []string{"", `null`, `{"h1":` + descA + `}`, `{}`, "", `{"h2":` + descB + `}`},
			want:       `{"h1":` + descA + `,"h2":` + descB + `}`,
		},
		{
			name:       "non-object answers skipped",
			fromEncode: []string{`[{"h1":` + descA + `}]`, `"h1"`, `{"h2":` + descB + `}`},
			want:       `{"h2":` + descB + `}`,
		},
		{
			name:       "partial answers",
			fromEncode: []string{`{"h1":` + descA + `}`, "", ""},
			want:       `{"h1":` + descA + `}`,
		},
		{
			name:       "no answers",
			fromEncode: nil,
		},
		{
			name:       "all empty",
			fromEncode: []string{"", `null`, `{}`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ec.NewNIXL().PrefillParams(answers(tc.fromEncode...))
			require.NoError(t, err)
			if tc.want == "" {
				assert.Nil(t, got)
				return
			}
			assert.JSONEq(t, tc.want, string(got))
		})
	}
}

func TestNIXLPrefillParamsConflict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		fromEncode []string
		want       string
	}{
		{
			name:       "different descriptors",
			fromEncode: []string{`{"abc123hash":` + descA + `}`, `{"abc123hash":` + descA2 + `}`},
			want:       `ec_transfer_params: conflicting descriptors for mm_hash "abc123hash" across encoder responses`,
		},
		{
			name:       "conflict after a multi-key response",
			fromEncode: []string{`{"h1":` + descA + `,"h2":` + descB + `}`, "", `{"h2":` + descA + `}`},
			want:       `ec_transfer_params: conflicting descriptors for mm_hash "h2" across encoder responses`,
		},
		{
			name:       "string and number",
			fromEncode: []string{`{"h1":{"peer_port":5501}}`, `{"h1":{"peer_port":"5501"}}`},
			want:       `ec_transfer_params: conflicting descriptors for mm_hash "h1" across encoder responses`,
		},
		{
			name:       "large integers that differ",
			fromEncode: []string{`{"h1":{"id":9007199254740993}}`, `{"h1":{"id":9007199254740992}}`},
			want:       `ec_transfer_params: conflicting descriptors for mm_hash "h1" across encoder responses`,
		},
		{
			name:       "extra field",
			fromEncode: []string{`{"h1":{"a":1}}`, `{"h1":{"a":1,"b":2}}`},
			want:       `ec_transfer_params: conflicting descriptors for mm_hash "h1" across encoder responses`,
		},
		{
			name:       "array order",
			fromEncode: []string{`{"h1":[1,2]}`, `{"h1":[2,1]}`},
			want:       `ec_transfer_params: conflicting descriptors for mm_hash "h1" across encoder responses`,
		},
		{
			name:       "malformed answer",
			fromEncode: []string{`{"h1":` + descA + `}`, `{"h2":`},
			want:       `ec_transfer_params: encoder response 1: `,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ec.NewNIXL().PrefillParams(answers(tc.fromEncode...))
			assert.Nil(t, got)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestNIXLPrefillParamsVerbatim(t *testing.T) {
	t.Parallel()
	got, err := ec.NewNIXL().PrefillParams(answers(
		`{ "h2": { "big": 12345678901234567891, "f": 1.50, "html": "a<b&c", "esc": "\u00e9" } }`,
		`{"h1": "x"}`,
	))
	require.NoError(t, err)
	assert.Equal(t, `{"h1":"x","h2":{"big":12345678901234567891,"f":1.50,"html":"a<b&c","esc":"\u00e9"}}`, string(got))
}

func TestNIXLPrefillParamsIdempotent(t *testing.T) {
	t.Parallel()
	in := answers(`{"h1":`+descA+`,"h2":`+descB+`}`, `{"h1":`+descA+`}`, `{"h3":"x"}`)
	c := ec.NewNIXL()
	first, err := c.PrefillParams(in)
	require.NoError(t, err)
	second, err := c.PrefillParams(in)
	require.NoError(t, err)
	assert.Equal(t, string(first), string(second))

	// Feeding the merged object back in as one answer changes nothing.
	again, err := c.PrefillParams([]json.RawMessage{first})
	require.NoError(t, err)
	assert.Equal(t, string(first), string(again))
}

func TestNIXLPrefillParamsDefensiveCopy(t *testing.T) {
	t.Parallel()
	in := answers(`{"h1":` + descA + `}`)
	c := ec.NewNIXL()
	got, err := c.PrefillParams(in)
	require.NoError(t, err)
	for i := range got {
		got[i] = 'x'
	}
	assert.JSONEq(t, `{"h1":`+descA+`}`, string(in[0]))
	again, err := c.PrefillParams(in)
	require.NoError(t, err)
	assert.JSONEq(t, `{"h1":`+descA+`}`, string(again))
}

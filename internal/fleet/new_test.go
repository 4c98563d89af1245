package fleet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/fleet"
)

func TestNewRejects(t *testing.T) {
	t.Parallel()
	static := func(ws ...fleet.Worker) fleet.Source { return fleet.Static(ws) }
	tests := []struct {
		name    string
		opts    fleet.Options
		sources []fleet.Source
		want    string
	}{
		{"no sources", fleet.Options{}, nil, "fleet: no sources"},
		{"negative history", fleet.Options{History: -1}, []fleet.Source{static()},
			"fleet: negative option (source timeout 0s, history -1)"},
		{"unknown role", fleet.Options{}, []fleet.Source{static(fleet.Worker{Role: "router", Address: "a:1"})},
			`fleet: static: worker "a:1": unknown role "router"`},
		{"no port", fleet.Options{}, []fleet.Source{static(fleet.Worker{Role: fleet.Decode, Address: "10.0.0.1"})},
			`fleet: static: worker "10.0.0.1": address: address 10.0.0.1: missing port in address`},
		{"port zero", fleet.Options{}, []fleet.Source{static(fleet.Worker{Role: fleet.Decode, Address: "10.0.0.1:0"})},
			`fleet: static: worker "10.0.0.1:0": address must be host:port with a port in 1..65535`},
		{"no host", fleet.Options{}, []fleet.Source{static(fleet.Worker{Role: fleet.Decode, Address: ":8000"})},
			`fleet: static: worker ":8000": address must be host:port with a port in 1..65535`},
		{"foreign id", fleet.Options{}, []fleet.Source{static(fleet.Worker{ID: "w1", Role: fleet.Decode, Address: "10.0.0.1:8000"})},
			`fleet: static: worker "10.0.0.1:8000": id "w1" must be "decode/10.0.0.1:8000"`},
		{"listed twice", fleet.Options{}, []fleet.Source{static(wA, fleet.Worker{Role: fleet.Decode, Address: "10.0.0.1:8000"})},
			`fleet: static: worker "decode/10.0.0.1:8000" listed twice`},
		{"dns empty name", fleet.Options{}, []fleet.Source{fleet.DNS(fleet.Decode, "", 8000, nil)},
			"fleet: dns decode: empty name"},
		{"dns port", fleet.Options{}, []fleet.Source{fleet.DNS(fleet.Decode, "decode.svc.", 70000, nil)},
			"fleet: dns decode decode.svc.:70000: port must be in 1..65535"},
		{"dns role", fleet.Options{}, []fleet.Source{fleet.DNS("", "decode.svc.", 8000, nil)},
			`fleet: dns decode.svc.:8000: unknown role ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := fleet.New(tt.opts, tt.sources...)
			assert.Nil(t, m)
			assert.EqualError(t, err, tt.want)
		})
	}
}

func TestParseRole(t *testing.T) {
	t.Parallel()
	for _, r := range fleet.Roles() {
		got, err := fleet.ParseRole(string(r))
		require.NoError(t, err)
		assert.Equal(t, r, got)
	}
	_, err := fleet.ParseRole("Decode")
	assert.EqualError(t, err, `unknown role "Decode" (known: encode, prefill, decode)`)
}

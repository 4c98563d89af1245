package params_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/params"
)

type wait struct {
	DefaultSeconds int    `param:"default_seconds"`
	Name           string `param:"name"`
}

type timeouts struct {
	Wait wait `param:"wait"`
}

type route struct {
	Model  string  `param:"model"`
	Weight float64 `param:"weight"`
}

// all has one field of every supported kind.
type all struct {
	Int      int               `param:"max_parallel"`
	I8       int8              `param:"i8"`
	I64      int64             `param:"i64"`
	U32      uint32            `param:"u32"`
	U64      uint64            `param:"u64"`
	Ratio    float64           `param:"ratio"`
	F32      float32           `param:"f32"`
	Timeout  time.Duration     `param:"download_timeout"`
	Address  string            `param:"address"`
	Allow    bool              `param:"allow_private_networks"`
	Domains  []string          `param:"allowed_domains"`
	Ports    []int             `param:"ports"`
	Timeouts timeouts          `param:"timeouts"`
	Routes   []route           `param:"routes"`
	Labels   map[string]string `param:"labels"`
	Limits   map[string]int    `param:"limits"`
	Extra    map[string]any    `param:"extra"`
	PInt     *int              `param:"p_int"`
	PBool    *bool             `param:"p_bool"`
	PWait    *wait             `param:"p_wait"`
	Raw      any               `param:"raw"`
	Untagged string
	Skipped  string `param:"-"`
}

func ptr[T any](v T) *T { return &v }

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  map[string]any
		want func(*all) // applied to a zero all; nil when an error is expected
		err  string
	}{
		// Integers.
		{name: "int from yaml int", raw: map[string]any{"max_parallel": 8}, want: func(a *all) { a.Int = 8 }},
		{name: "int from integral float", raw: map[string]any{"max_parallel": 8192.0}, want: func(a *all) { a.Int = 8192 }},
		{name: "int from negative float", raw: map[string]any{"i64": -3.0}, want: func(a *all) { a.I64 = -3 }},
		{name: "int from json number", raw: map[string]any{"max_parallel": json.Number("42")}, want: func(a *all) { a.Int = 42 }},
		{name: "int from integral json number", raw: map[string]any{"max_parallel": json.Number("42.0")}, want: func(a *all) { a.Int = 42 }},
		{name: "int from int64", raw: map[string]any{"i64": int64(math.MaxInt64)}, want: func(a *all) { a.I64 = math.MaxInt64 }},
		{name: "uint32 from int", raw: map[string]any{"u32": 4294967295}, want: func(a *all) { a.U32 = math.MaxUint32 }},
		{name: "uint64 from yaml uint64", raw: map[string]any{"u64": uint64(math.MaxUint64)}, want: func(a *all) { a.U64 = math.MaxUint64 }},
		{name: "uint64 from big float", raw: map[string]any{"u64": 0x1p63}, want: func(a *all) { a.U64 = 1 << 63 }},
		{name: "uint64 from big json number", raw: map[string]any{"u64": json.Number("18446744073709551615")}, want: func(a *all) { a.U64 = math.MaxUint64 }},
		{name: "int rejects fraction", raw: map[string]any{"max_parallel": 8192.5}, err: "max_parallel: expected integer, got 8192.5"},
		{name: "int rejects fractional json number", raw: map[string]any{"max_parallel": json.Number("8192.5")}, err: "max_parallel: expected integer, got 8192.5"},
		{name: "int rejects NaN", raw: map[string]any{"max_parallel": math.NaN()}, err: "max_parallel: expected integer, got NaN"},
		{name: "int rejects string", raw: map[string]any{"max_parallel": "8"}, err: "max_parallel: expected number, got string"},
		{name: "int rejects bool", raw: map[string]any{"max_parallel": true}, err: "max_parallel: expected number, got bool"},
		{name: "int rejects null", raw: map[string]any{"max_parallel": nil}, err: "max_parallel: expected integer, got null"},
		{name: "int8 overflow", raw: map[string]any{"i8": 300}, err: "i8: out of range for int8, got 300"},
		{name: "uint rejects negative", raw: map[string]any{"u32": -1}, err: "u32: out of range for uint32, got -1"},
		{name: "uint32 overflow", raw: map[string]any{"u32": 4294967296.0}, err: "u32: out of range for uint32, got 4294967296"},
		{name: "int64 from too big uint64", raw: map[string]any{"i64": uint64(math.MaxUint64)}, err: "i64: out of range for int64, got 18446744073709551615"},
		{name: "int from huge float", raw: map[string]any{"max_parallel": 1e20}, err: "max_parallel: out of range for int, got 1e+20"},
		{name: "int from infinity", raw: map[string]any{"max_parallel": math.Inf(1)}, err: "max_parallel: out of range for int, got +Inf"},

		// Floats.
		{name: "float from int", raw: map[string]any{"ratio": 2}, want: func(a *all) { a.Ratio = 2 }},
		{name: "float from float", raw: map[string]any{"ratio": 0.25}, want: func(a *all) { a.Ratio = 0.25 }},
		{name: "float from json number", raw: map[string]any{"ratio": json.Number("1.5")}, want: func(a *all) { a.Ratio = 1.5 }},
		{name: "float rejects string", raw: map[string]any{"ratio": "0.5"}, err: "ratio: expected number, got string"},
		{name: "float32 overflow", raw: map[string]any{"f32": 1e300}, err: "f32: out of range for float32, got 1e+300"},

		// Durations.
		{name: "duration from string", raw: map[string]any{"download_timeout": "1m30s"}, want: func(a *all) { a.Timeout = 90 * time.Second }},
		{name: "duration rejects bare number string", raw: map[string]any{"download_timeout": "30"}, err: `download_timeout: expected a duration string like "30s", got "30"`},
		{name: "duration rejects int", raw: map[string]any{"download_timeout": 30}, err: `download_timeout: expected a duration string like "30s", got 30`},
		{name: "duration rejects float", raw: map[string]any{"download_timeout": 1.5}, err: `download_timeout: expected a duration string like "30s", got 1.5`},
		{name: "duration rejects list", raw: map[string]any{"download_timeout": []any{"1s"}}, err: `download_timeout: expected a duration string like "30s", got list`},
		{name: "duration rejects null", raw: map[string]any{"download_timeout": nil}, err: "download_timeout: expected a duration string, got null"},

		// Strings and bools.
		{name: "string", raw: map[string]any{"address": "http://render:8080"}, want: func(a *all) { a.Address = "http://render:8080" }},
		{name: "string rejects int", raw: map[string]any{"address": 8080}, err: "address: expected string, got int"},
		{name: "string rejects null", raw: map[string]any{"address": nil}, err: "address: expected string, got null"},
		{name: "bool", raw: map[string]any{"allow_private_networks": true}, want: func(a *all) { a.Allow = true }},
		{name: "bool rejects string", raw: map[string]any{"allow_private_networks": "true"}, err: "allow_private_networks: expected bool, got string"},
		{name: "bool rejects int", raw: map[string]any{"allow_private_networks": 1}, err: "allow_private_networks: expected bool, got int"},

		// Lists.
		{name: "list of strings", raw: map[string]any{"allowed_domains": []any{"a.example", "b.example"}}, want: func(a *all) { a.Domains = []string{"a.example", "b.example"} }},
		{name: "empty list", raw: map[string]any{"allowed_domains": []any{}}, want: func(a *all) { a.Domains = []string{} }},
		{name: "null list is absent", raw: map[string]any{"allowed_domains": nil}, want: func(*all) {}},
		{name: "list of ints from numbers", raw: map[string]any{"ports": []any{80, 443.0}}, want: func(a *all) { a.Ports = []int{80, 443} }},
		{name: "list rejects scalar", raw: map[string]any{"allowed_domains": "a.example"}, err: "allowed_domains: expected a list of strings, got string"},
		{name: "list rejects bad element", raw: map[string]any{"allowed_domains": []any{"a.example", 7}}, err: "allowed_domains[1]: expected string, got int"},
		{name: "int list rejects map", raw: map[string]any{"ports": map[string]any{}}, err: "ports: expected a list, got map"},

		// Nested structs, lists of structs, maps.
		{
			name: "nested struct",
			raw:  map[string]any{"timeouts": map[string]any{"wait": map[string]any{"default_seconds": 5, "name": "w"}}},
			want: func(a *all) { a.Timeouts.Wait = wait{DefaultSeconds: 5, Name: "w"} },
		},
		{name: "nested error path", raw: map[string]any{"timeouts": map[string]any{"wait": map[string]any{"default_seconds": 1.5}}}, err: "timeouts.wait.default_seconds: expected integer, got 1.5"},
		{name: "nested unknown key", raw: map[string]any{"timeouts": map[string]any{"wait": map[string]any{"x": 1}}}, err: `timeouts.wait: unknown key "x" (known: default_seconds, name)`},
		{name: "nested injected key is unknown", raw: map[string]any{"timeouts": map[string]any{"kv_connector": "kv-nixl"}}, err: `timeouts: unknown key "kv_connector" (known: wait)`},
		{name: "struct rejects scalar", raw: map[string]any{"timeouts": "5s"}, err: "timeouts: expected a map, got string"},
		{name: "null struct is absent", raw: map[string]any{"timeouts": nil}, want: func(*all) {}},
		{
			name: "list of structs",
			raw:  map[string]any{"routes": []any{map[string]any{"model": "a", "weight": 1}, map[string]any{"model": "b"}}},
			want: func(a *all) { a.Routes = []route{{Model: "a", Weight: 1}, {Model: "b"}} },
		},
		{
			name: "list of structs error path",
			raw:  map[string]any{"routes": []any{map[string]any{"model": "a"}, map[string]any{}, map[string]any{"model": 3}}},
			err:  "routes[2].model: expected string, got int",
		},
		{name: "list of structs rejects scalar element", raw: map[string]any{"routes": []any{"a"}}, err: "routes[0]: expected a map, got string"},
		{name: "map of strings", raw: map[string]any{"labels": map[string]any{"a": "x", "b": "y"}}, want: func(a *all) { a.Labels = map[string]string{"a": "x", "b": "y"} }},
		{name: "map of ints", raw: map[string]any{"limits": map[string]any{"a": 1, "b": 2.0}}, want: func(a *all) { a.Limits = map[string]int{"a": 1, "b": 2} }},
		{name: "map error path", raw: map[string]any{"limits": map[string]any{"a": 1, "b": "x"}}, err: "limits.b: expected number, got string"},
		{name: "map rejects list", raw: map[string]any{"labels": []any{"a"}}, err: "labels: expected a map, got list"},
		{
			name: "map of any keeps raw values",
			raw:  map[string]any{"extra": map[string]any{"n": 1, "s": "x", "l": []any{true}, "z": nil}},
			want: func(a *all) { a.Extra = map[string]any{"n": 1, "s": "x", "l": []any{true}, "z": nil} },
		},
		{name: "interface keeps raw value", raw: map[string]any{"raw": []any{1, "a"}}, want: func(a *all) { a.Raw = []any{1, "a"} }},

		// Pointers.
		{name: "pointer to int", raw: map[string]any{"p_int": 0}, want: func(a *all) { a.PInt = ptr(0) }},
		{name: "pointer to bool", raw: map[string]any{"p_bool": false}, want: func(a *all) { a.PBool = ptr(false) }},
		{name: "pointer to struct", raw: map[string]any{"p_wait": map[string]any{"name": "n"}}, want: func(a *all) { a.PWait = &wait{Name: "n"} }},
		{name: "pointer error", raw: map[string]any{"p_bool": "yes"}, err: "p_bool: expected bool, got string"},
		{name: "pointer to int rejects null", raw: map[string]any{"p_int": nil}, err: "p_int: expected integer, got null"},
		{name: "null pointer to struct is absent", raw: map[string]any{"p_wait": nil}, want: func(*all) {}},

		// Keys.
		{name: "nil map", raw: nil, want: func(*all) {}},
		{name: "injected keys accepted when undeclared", raw: map[string]any{"kv_connector": "kv-nixl", "ec_connector": 3, "use_openai_format": "no"}, want: func(*all) {}},
		{name: "first error in key order", raw: map[string]any{"b_bad": 1, "address": 1}, err: "address: expected string, got int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got all
			err := params.Decode(tt.raw, &got)
			if tt.want == nil {
				assert.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			var want all
			tt.want(&want)
			assert.Equal(t, want, got)
		})
	}
}

type small struct {
	Address string        `param:"address"`
	Timeout time.Duration `param:"timeout"`
}

func TestDecodeUnknownKey(t *testing.T) {
	t.Parallel()
	type tagged struct {
		Address  string        `param:"address"`
		Timeout  time.Duration `param:"timeout"`
		Untagged string
		Skipped  string `param:"-"`
	}
	tests := []struct {
		name string
		key  string
	}{
		{name: "unknown", key: "bogus_key"},
		{name: "untagged field", key: "Untagged"},
		{name: "dash-tagged field", key: "-"},
		{name: "case differs", key: "Address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := params.Decode(map[string]any{"address": "x", tt.key: "v"}, &tagged{})
			assert.EqualError(t, err, `unknown key "`+tt.key+`" (known: address, timeout)`)
		})
	}
}

func TestDecodeKeepsDefaults(t *testing.T) {
	t.Parallel()
	got := all{
		Int:      8,
		Address:  "http://default",
		Timeouts: timeouts{Wait: wait{DefaultSeconds: 30, Name: "default"}},
		Domains:  []string{"default.example"},
		PWait:    &wait{DefaultSeconds: 1, Name: "default"},
	}
	shared := got.PWait
	err := params.Decode(map[string]any{
		"address":  "http://set",
		"timeouts": map[string]any{"wait": map[string]any{"name": "set"}},
		"p_wait":   map[string]any{"name": "set"},
	}, &got)
	require.NoError(t, err)
	assert.Equal(t, 8, got.Int, "absent key keeps its default")
	assert.Equal(t, "http://set", got.Address)
	assert.Equal(t, wait{DefaultSeconds: 30, Name: "set"}, got.Timeouts.Wait, "nested defaults survive")
	assert.Equal(t, []string{"default.example"}, got.Domains)
	assert.Equal(t, &wait{DefaultSeconds: 1, Name: "set"}, got.PWait, "pointer starts from its current value")
	assert.Equal(t, &wait{DefaultSeconds: 1, Name: "default"}, shared, "the old pointee is not written to")
}

func TestDecodeReplacesListsAndMaps(t *testing.T) {
	t.Parallel()
	got := all{Domains: []string{"old"}, Labels: map[string]string{"old": "x"}}
	err := params.Decode(map[string]any{
		"allowed_domains": []any{"new"},
		"labels":          map[string]any{"new": "y"},
	}, &got)
	require.NoError(t, err)
	assert.Equal(t, []string{"new"}, got.Domains)
	assert.Equal(t, map[string]string{"new": "y"}, got.Labels)
}

func TestDecodeAbsentPointersStayNil(t *testing.T) {
	t.Parallel()
	var got all
	require.NoError(t, params.Decode(map[string]any{"max_parallel": 1}, &got))
	assert.Nil(t, got.PInt)
	assert.Nil(t, got.PBool)
	assert.Nil(t, got.PWait)
}

func TestDecodeDeclaredInjectedKey(t *testing.T) {
	t.Parallel()
	type step struct {
		KVConnector     string `param:"kv_connector"`
		UseOpenAIFormat *bool  `param:"use_openai_format"`
	}
	var got step
	require.NoError(t, params.Decode(map[string]any{"kv_connector": "kv-nixl", "use_openai_format": false, "ec_connector": "ec-nixl"}, &got))
	assert.Equal(t, step{KVConnector: "kv-nixl", UseOpenAIFormat: ptr(false)}, got)

	err := params.Decode(map[string]any{"use_openai_format": "true"}, &step{})
	assert.EqualError(t, err, "use_openai_format: expected bool, got string", "a declared injected key is decoded strictly")
}

func TestDecodeNamedTypes(t *testing.T) {
	t.Parallel()
	type name string
	type level int
	type named struct {
		Name  name           `param:"name"`
		Level level          `param:"level"`
		Names map[name]level `param:"names"`
	}
	var got named
	require.NoError(t, params.Decode(map[string]any{"name": "x", "level": 3.0, "names": map[string]any{"a": 1}}, &got))
	assert.Equal(t, named{Name: "x", Level: 3, Names: map[name]level{"a": 1}}, got)
}

func TestDecodeBadDestination(t *testing.T) {
	t.Parallel()
	var nilPtr *small
	n := 1
	for _, dst := range []any{nil, small{}, nilPtr, &n} {
		err := params.Decode(map[string]any{}, dst)
		assert.ErrorContains(t, err, "params: destination must be a non-nil pointer to a struct")
	}
}

func TestDecodeUnsupportedFieldType(t *testing.T) {
	t.Parallel()
	type bad struct {
		C chan int `param:"c"`
	}
	err := params.Decode(map[string]any{"c": 1}, &bad{})
	assert.EqualError(t, err, "c: params: unsupported field type chan int")
}

func TestDecodeExact(t *testing.T) {
	t.Parallel()
	var got small
	require.NoError(t, params.DecodeExact(map[string]any{"address": "x", "timeout": "1s"}, &got))
	assert.Equal(t, small{Address: "x", Timeout: time.Second}, got)

	err := params.DecodeExact(map[string]any{"use_openai_format": false}, &small{})
	assert.EqualError(t, err, `unknown key "use_openai_format" (known: address, timeout)`)
	assert.ErrorContains(t, params.DecodeExact(nil, small{}), "params: destination must be")
}

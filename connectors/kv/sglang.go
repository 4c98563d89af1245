package kv

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/google/uuid"
)

const (
	// SGLangName is the config name of the SGLang connector.
	SGLangName = "kv-sglang"
	// SGLangPortEnv is the environment variable that sets the SGLang
	// bootstrap port, read once at startup by SGLangPortFromEnv.
	SGLangPortEnv = "SGLANG_BOOTSTRAP_PORT"
	// SGLangDefaultPort is the bootstrap port when SGLangPortEnv is unset
	// or empty (SGLang's own default).
	SGLangDefaultPort = 8998
)

// SGLang is SGLang's disaggregation protocol: the prefill leg carries the
// prefill worker's bootstrap port and a fresh bootstrap room; the prefill
// worker echoes its bootstrap fields in its answer, which the decode leg
// hands on verbatim. No bootstrap_host is sent.
type SGLang struct {
	port int
}

// NewSGLang returns the SGLang connector that sends port as bootstrap_port.
// The port is used as given; SGLangPortFromEnv validates one.
func NewSGLang(port int) *SGLang { return &SGLang{port: port} }

// SGLangPortFromEnv returns the bootstrap port from SGLangPortEnv, looked
// up with lookup (os.LookupEnv in production): SGLangDefaultPort when unset
// or empty, otherwise a base-10 integer in 1..65535. Unlike the reference,
// which logs and falls back to the default, a bad value is an error, so the
// coordinator fails at startup instead of talking to the wrong port.
func SGLangPortFromEnv(lookup func(string) (string, bool)) (int, error) {
	s, _ := lookup(SGLangPortEnv)
	if s == "" {
		return SGLangDefaultPort, nil
	}
	port, err := strconv.Atoi(s)
	if err != nil || port < 1 || port > 65535 {
		return 0, fmt.Errorf("%s: %q is not a port number in 1..65535", SGLangPortEnv, s)
	}
	return port, nil
}

// Name returns SGLangName.
func (*SGLang) Name() string { return SGLangName }

// PrefillParams returns the flags for a remote decode, bootstrap_port and a
// fresh UUIDv4 string as bootstrap_room.
func (s *SGLang) PrefillParams() (json.RawMessage, error) {
	room, err := uuid.NewRandom()
	if err != nil {
		return nil, fmt.Errorf("%s: bootstrap room: %w", SGLangName, err)
	}
	return fmt.Appendf(nil, `{"bootstrap_port":%d,"bootstrap_room":"%s",`+
		`"do_remote_decode":true,"do_remote_prefill":false}`, s.port, room), nil
}

// DecodeParams returns every field of the prefill worker's answer, verbatim
// (the echoed bootstrap_host, bootstrap_port, bootstrap_room, anything
// else), with do_remote_decode false and do_remote_prefill true.
func (*SGLang) DecodeParams(fromPrefill json.RawMessage) (json.RawMessage, error) {
	return handOff(fromPrefill)
}

// MissingParams names which of bootstrap_host, bootstrap_port and
// bootstrap_room the answer lacks: the decode leg takes them from the
// answer alone (no bootstrap_host is sent on the prefill leg), and the
// decode worker cannot find the prefill worker's KV without all three.
func (*SGLang) MissingParams(fromPrefill json.RawMessage) []string {
	return missing(fromPrefill, "bootstrap_host", "bootstrap_port", "bootstrap_room")
}

var _ Connector = (*SGLang)(nil)

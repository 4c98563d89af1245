package config

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/coordinator-project/coordinator/internal/fleet"
	"github.com/coordinator-project/coordinator/internal/tlsfiles"
)

// Control configures the RL control plane (coordinator extension, see
// docs/rl.md): the ControlService listener, the membership of the engines
// it controls, its fan-out and the hold of new requests while the fleet is
// paused.
type Control struct {
	// ListenAddr is the control listener's address, serving the
	// ControlService over gRPC and its REST transcoding under /v1/rl/ on
	// one port. Key control.listen_addr, default "" (off), env
	// COORDINATOR_CONTROL_LISTEN_ADDR. Keep it off the public network:
	// loopback, a pod-local port, or behind TLS and a token.
	ListenAddr string `param:"listen_addr"`
	// TLS serves the control listener over TLS, with mutual TLS when
	// client_auth asks for it. Keys control.tls.{cert_file,key_file,
	// client_ca_file,client_auth}; absent: plaintext (h2c for gRPC).
	TLS tlsfiles.ServerConfig `param:"tls"`
	// TokenFile holds the bearer token every control call must carry
	// (Authorization: Bearer <token>, gRPC metadata authorization); read at
	// start, surrounding whitespace dropped. Key control.token_file,
	// default "" (no token), env COORDINATOR_CONTROL_TOKEN_FILE.
	TokenFile string `param:"token_file"`
	// CallTimeout bounds one worker's answer to a control route (weight
	// transfers take minutes). Key control.call_timeout, default 5m.
	CallTimeout time.Duration `param:"call_timeout"`
	// StateTimeout bounds one worker's answers to ListWorkers' state
	// routes. Key control.state_timeout, default 5s.
	StateTimeout time.Duration `param:"state_timeout"`
	// Concurrency bounds the workers one call talks to at once. Key
	// control.concurrency, default 64.
	Concurrency int `param:"concurrency"`
	// Hold bounds the inference requests that wait at admission while a
	// pause made through the ControlService is in force.
	Hold Hold `param:"hold"`
	// Membership is where the engines of each role come from.
	Membership Membership `param:"membership"`
}

// Hold bounds the requests held at admission during a pause.
type Hold struct {
	// MaxWait is how long a request waits for the resume before it gets
	// 503 with Retry-After. Key control.hold.max_wait, default 60s.
	MaxWait time.Duration `param:"max_wait"`
	// MaxRequests is how many requests may wait at once; one more gets 503
	// at once. Key control.hold.max_requests, default 1024.
	MaxRequests int `param:"max_requests"`
}

// Membership lists the engines statically, or names the DNS names (a
// headless Kubernetes Service per role) they are resolved from; both may
// be used together.
type Membership struct {
	// Static is a fixed list of engines. Key control.membership.static, a
	// list of {role, address}.
	Static []StaticWorker `param:"static"`
	// DNS are the names resolved per role. Key control.membership.dns, a
	// list of {role, name, port}.
	DNS []DNSRole `param:"dns"`
	// RefreshInterval is how often the membership is resolved again (and
	// before every control call). Key
	// control.membership.refresh_interval, default 10s.
	RefreshInterval time.Duration `param:"refresh_interval"`
}

// StaticWorker is one engine of the static list.
type StaticWorker struct {
	// Role is encode, prefill or decode.
	Role string `param:"role"`
	// Address is the engine's own host:port (its control routes).
	Address string `param:"address"`
}

// DNSRole is the DNS name of one role's engines.
type DNSRole struct {
	// Role is encode, prefill or decode.
	Role string `param:"role"`
	// Name is resolved to the engines' addresses (A and AAAA records).
	Name string `param:"name"`
	// Port is the engines' port.
	Port int `param:"port"`
}

// defaultControl is Control's defaults.
func defaultControl() Control {
	return Control{
		CallTimeout:  5 * time.Minute,
		StateTimeout: 5 * time.Second,
		Concurrency:  64,
		Hold:         Hold{MaxWait: 60 * time.Second, MaxRequests: 1024},
		Membership:   Membership{RefreshInterval: 10 * time.Second},
	}
}

// Enabled reports whether the control listener is on.
func (c Control) Enabled() bool { return c.ListenAddr != "" }

func (c Control) validate() error {
	if err := positive(
		keyed{"control.call_timeout", c.CallTimeout},
		keyed{"control.state_timeout", c.StateTimeout},
		keyed{"control.hold.max_wait", c.Hold.MaxWait},
		keyed{"control.membership.refresh_interval", c.Membership.RefreshInterval},
	); err != nil {
		return err
	}
	switch {
	case c.Concurrency < 1:
		return fmt.Errorf("control.concurrency: must be at least 1, got %d", c.Concurrency)
	case c.Hold.MaxRequests < 0:
		return fmt.Errorf("control.hold.max_requests: must not be negative, got %d", c.Hold.MaxRequests)
	case c.ListenAddr == "" && (c.TLS.Enabled() || c.TokenFile != ""):
		return errors.New("control.tls and control.token_file need control.listen_addr")
	}
	for i, w := range c.Membership.Static {
		if _, err := fleet.ParseRole(w.Role); err != nil {
			return fmt.Errorf("control.membership.static[%d].role: %w", i, err)
		}
		if _, _, err := net.SplitHostPort(w.Address); err != nil {
			return fmt.Errorf("control.membership.static[%d].address: must be host:port, got %q", i, w.Address)
		}
	}
	for i, d := range c.Membership.DNS {
		if _, err := fleet.ParseRole(d.Role); err != nil {
			return fmt.Errorf("control.membership.dns[%d].role: %w", i, err)
		}
		switch {
		case d.Name == "":
			return fmt.Errorf("control.membership.dns[%d].name: required", i)
		case d.Port < 1 || d.Port > 65535:
			return fmt.Errorf("control.membership.dns[%d].port: must be in 1..65535, got %d", i, d.Port)
		}
	}
	return nil
}

package procs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// Group is the processes a tool started in one directory (their logs and
// config files), stopped together in reverse order. Not safe for
// concurrent use.
type Group struct {
	dir   string
	procs []*Process
}

// NewGroup is an empty group keeping its files in dir.
func NewGroup(dir string) *Group { return &Group{dir: dir} }

// Dir is the directory of the group's logs and config files.
func (g *Group) Dir() string { return g.dir }

// Start starts a process (see Start) and adds it to the group.
func (g *Group) Start(name, bin string, args ...string) (*Process, error) {
	p, err := Start(g.dir, name, bin, args...)
	if err != nil {
		return nil, err
	}
	g.procs = append(g.procs, p)
	return p, nil
}

// StopAll stops every process, the last started first, each given grace
// to exit on SIGTERM.
func (g *Group) StopAll(grace time.Duration) {
	for _, p := range slices.Backward(g.procs) {
		p.Stop(grace)
	}
}

// SimOptions are the simulator's timing and checking flags.
type SimOptions struct {
	// TTFT is --ttft, the delay before the first decoded token.
	TTFT time.Duration
	// TokenDelay is --token-delay, the delay between streamed tokens.
	TokenDelay time.Duration
	// Strict is --strict, the wire-contract checks.
	Strict bool
}

// Sim is a running simulator and the base URLs of its gateway and its
// render service.
type Sim struct {
	*Process
	Gateway, Render string
}

// readyTimeout bounds the wait for a started process to answer.
const readyTimeout = 60 * time.Second

// StartSim starts the simulator bin as name on two free loopback ports and
// waits until both its gateway and its render service answer.
func (g *Group) StartSim(ctx context.Context, bin, name string, o SimOptions) (*Sim, error) {
	gatewayAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	renderAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	p, err := g.Start(name, bin, "--gateway-addr", gatewayAddr, "--render-addr", renderAddr,
		"--ttft", o.TTFT.String(), "--token-delay", o.TokenDelay.String(), "--strict="+strconv.FormatBool(o.Strict))
	if err != nil {
		return nil, err
	}
	s := &Sim{Process: p, Gateway: "http://" + gatewayAddr, Render: "http://" + renderAddr}
	if err := p.WaitReady(ctx, s.Gateway+"/health", readyTimeout); err != nil {
		return nil, err
	}
	return s, p.WaitReady(ctx, s.Render+"/health", readyTimeout)
}

// StartCoordinator writes config to name.yaml in the group's directory,
// starts the coordinator bin on it as name and waits until base (its REST
// listener, e.g. http://127.0.0.1:8080) answers /readyz.
func (g *Group) StartCoordinator(ctx context.Context, bin, name string, config []byte, base string) (*Process, error) {
	path := filepath.Join(g.dir, name+".yaml")
	if err := os.WriteFile(path, config, 0o600); err != nil {
		return nil, err
	}
	p, err := g.Start(name, bin, "--config", path)
	if err != nil {
		return nil, err
	}
	return p, p.WaitReady(ctx, base+"/readyz", readyTimeout)
}

package sim

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// ListenEngines gives every engine its own listener and serves on it, in
// goroutines, until [Sim.CloseEngines] or the engine's [Engine.Stop]. addr
// is a loopback host:port: port 0 gives each engine a free port; a fixed
// port p gives the engines p, p+1, ... in [Sim.Engines] order. On error
// no engine is left listening.
func (s *Sim) ListenEngines(ctx context.Context, addr string) error {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("sim: engine address: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 {
		return fmt.Errorf("sim: engine address: bad port %q", portStr)
	}
	var lc net.ListenConfig
	var listeners []net.Listener
	engines := s.allEngines()
	for i := range engines {
		p := port
		if p != 0 {
			p += i
		}
		l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return fmt.Errorf("sim: listen engine %s: %w", engines[i].id, err)
		}
		listeners = append(listeners, l)
	}
	for i, e := range engines {
		s.serveEngine(e, listeners[i])
	}
	return nil
}

// serveEngine serves e on l in a goroutine that ends with the server.
func (s *Sim) serveEngine(e *engine, l net.Listener) {
	srv := &http.Server{Handler: s.engineHandler(e), ReadHeaderTimeout: 10 * time.Second}
	e.mu.Lock()
	e.server, e.addr = srv, l.Addr().String()
	stopped := e.stopped
	e.mu.Unlock()
	if stopped {
		_ = l.Close()
		return
	}
	s.engineServers.Add(1)
	go func() {
		defer s.engineServers.Done()
		_ = srv.Serve(l)
	}()
}

// CloseEngines stops serving every engine's listener, closing its
// connections, and waits for the servers to end. The engines stay up for
// gateway legs.
func (s *Sim) CloseEngines() {
	for _, e := range s.allEngines() {
		e.mu.Lock()
		srv := e.server
		e.mu.Unlock()
		if srv != nil {
			_ = srv.Close()
		}
	}
	s.engineServers.Wait()
}

func (s *Sim) allEngines() []*engine {
	var out []*engine
	for _, pool := range s.engines {
		out = append(out, pool...)
	}
	return out
}

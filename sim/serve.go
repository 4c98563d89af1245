package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// shutdownGrace is how long Serve lets in-flight requests finish once its
// context ends before closing their connections.
const shutdownGrace = 5 * time.Second

// ListenAndServe listens on gatewayAddr and renderAddr (loopback addresses
// such as 127.0.0.1:8200) and serves [Sim.Gateway] and [Sim.Render] on them
// until ctx ends; see [Sim.Serve].
func (s *Sim) ListenAndServe(ctx context.Context, gatewayAddr, renderAddr string) error {
	var lc net.ListenConfig
	gl, err := lc.Listen(ctx, "tcp", gatewayAddr)
	if err != nil {
		return fmt.Errorf("sim: listen gateway: %w", err)
	}
	rl, err := lc.Listen(ctx, "tcp", renderAddr)
	if err != nil {
		_ = gl.Close()
		return fmt.Errorf("sim: listen render: %w", err)
	}
	return s.Serve(ctx, gl, rl)
}

// Serve serves [Sim.Gateway] on gateway and [Sim.Render] on render until ctx
// ends or a server fails; it takes ownership of both listeners. On the way
// out it shuts both servers down, giving in-flight requests a few seconds
// before closing their connections, and returns nil after a shutdown caused
// by ctx.
func (s *Sim) Serve(ctx context.Context, gateway, render net.Listener) error {
	servers := []*http.Server{
		{Handler: s.Gateway(), ReadHeaderTimeout: 10 * time.Second},
		{Handler: s.Render(), ReadHeaderTimeout: 10 * time.Second},
	}
	listeners := []net.Listener{gateway, render}
	errs := make(chan error, len(servers))
	for i, srv := range servers {
		go func() {
			errs <- srv.Serve(listeners[i])
		}()
	}

	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(shutdownCtx); err != nil {
			_ = srv.Close()
		}
	}
	// Collect the remaining Serve results so no goroutine outlives Serve.
	remaining := len(servers)
	if first != nil {
		remaining--
	}
	for range remaining {
		if err := <-errs; first == nil && !errors.Is(err, http.ErrServerClosed) {
			first = err
		}
	}
	if first != nil && !errors.Is(first, http.ErrServerClosed) {
		return fmt.Errorf("sim: serve: %w", first)
	}
	return nil
}

package control

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"go.uber.org/fx"

	"github.com/coordinator-project/coordinator/internal/fleet"
	"github.com/coordinator-project/coordinator/internal/legids"
	"github.com/coordinator-project/coordinator/internal/tlsfiles"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
)

// Module serves the ControlService on control.listen_addr when it is set:
// the membership refreshed on its interval, the listener with its TLS and
// token. With the key unset it does nothing.
var Module = fx.Module("control", fx.Invoke(serve))

// serving are what the control listener is built from.
type serving struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Log       *slog.Logger
	Admission *admission.Controller
	InFlight  *legids.Registry
	Version   *fleet.Version
	Metrics   *metrics.Metrics
	Addresses *service.Addresses
	Reloads   tlsfiles.Observer
}

func serve(p serving) error {
	cfg := p.Config.Control
	if !cfg.Enabled() {
		return nil
	}
	members, err := NewMembership(cfg.Membership, p.Log, nil)
	if err != nil {
		return err
	}
	token, err := readToken(cfg.TokenFile)
	if err != nil {
		return err
	}
	var tlsConfig *tls.Config
	if cfg.TLS.Enabled() {
		files, err := tlsfiles.NewServer(cfg.TLS, tlsfiles.Options{Name: "control.tls", Log: p.Log, Observer: p.Reloads})
		if err != nil {
			return fmt.Errorf("control.tls.%w", err)
		}
		tlsConfig = files.TLSConfig("h2", "http/1.1")
	}
	hold := p.Admission.Hold()
	m := p.Metrics.NewControl(hold.Waiting, hold.Closed)
	srv, err := New(Options{
		Members: members, Hold: hold, InFlight: p.InFlight, Version: p.Version, Metrics: m, Log: p.Log,
		CallTimeout: cfg.CallTimeout, StateTimeout: cfg.StateTimeout, Concurrency: cfg.Concurrency,
	})
	if err != nil {
		return err
	}
	l := newListener(newHandler(srv, token, m), tlsConfig, p.Log)
	ctx, stop := context.WithCancel(context.Background())
	refreshed := make(chan struct{})
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			lis, err := net.Listen("tcp", cfg.ListenAddr)
			if err != nil {
				stop()
				return fmt.Errorf("control.listen_addr: %w", err)
			}
			p.Addresses.SetControl(lis.Addr().String())
			p.Log.Info("control listening", "addr", lis.Addr().String(), "tls", cfg.TLS.Enabled(), "token", token != "")
			go func() {
				defer close(refreshed)
				_ = members.Run(ctx, cfg.Membership.RefreshInterval)
			}()
			go l.serve(lis)
			return nil
		},
		OnStop: func(ctx context.Context) error {
			stop()
			err := l.close(ctx)
			select {
			case <-refreshed:
			case <-ctx.Done():
			}
			return err
		},
	})
	return nil
}

// NewMembership is the membership of the config's static list and DNS
// names (r resolves them; nil: the system's resolver), its first epoch
// from the clock.
func NewMembership(cfg config.Membership, log *slog.Logger, r *net.Resolver) (*fleet.Membership, error) {
	var static []fleet.Worker
	for _, w := range cfg.Static {
		static = append(static, fleet.NewWorker(fleet.Role(w.Role), w.Address))
	}
	sources := []fleet.Source{fleet.Static(static)}
	for _, d := range cfg.DNS {
		sources = append(sources, fleet.DNS(fleet.Role(d.Role), d.Name, d.Port, r))
	}
	m, err := fleet.New(fleet.Options{Log: log, FirstEpoch: fleet.FirstEpochNow()}, sources...)
	if err != nil {
		return nil, fmt.Errorf("control.membership: %w", err)
	}
	return m, nil
}

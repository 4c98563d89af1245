package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
)

// Source answers which workers exist now, for the roles it covers.
//
// A Membership calls Resolve from one goroutine at a time, bounded by ctx
// (a source shared by several memberships must allow concurrent calls). On
// error the answer is ignored: the membership keeps the source's last good
// answer.
type Source interface {
	// Resolve returns the workers the source knows now, in any order.
	Resolve(ctx context.Context) ([]Worker, error)
	// Validate reports a source built with bad arguments; New calls it.
	Validate() error
	// String names the source in errors and logs.
	String() string
}

// StaticSource is a fixed list of workers: the config's static fleet.
type StaticSource struct {
	workers []Worker
}

// Static is the source that always answers workers. A worker with an empty
// ID gets role/address; the slice is copied.
func Static(workers []Worker) *StaticSource {
	ws := slices.Clone(workers)
	for i := range ws {
		if ws[i].ID == "" {
			ws[i].ID = workerID(ws[i].Role, ws[i].Address)
		}
	}
	return &StaticSource{workers: ws}
}

// Validate reports an invalid worker or one listed twice.
func (s *StaticSource) Validate() error {
	seen := make(map[string]bool, len(s.workers))
	for _, w := range s.workers {
		if err := w.validate(); err != nil {
			return fmt.Errorf("fleet: static: %w", err)
		}
		if seen[w.ID] {
			return fmt.Errorf("fleet: static: worker %q listed twice", w.ID)
		}
		seen[w.ID] = true
	}
	return nil
}

// Resolve returns the list.
func (s *StaticSource) Resolve(context.Context) ([]Worker, error) {
	return slices.Clone(s.workers), nil
}

// String is "static (N workers)".
func (s *StaticSource) String() string {
	return fmt.Sprintf("static (%d workers)", len(s.workers))
}

// DNSSource is the workers of one role behind a DNS name: a headless
// Kubernetes Service, whose A and AAAA records are the addresses of its
// ready pods. Every address becomes a worker at host:port.
type DNSSource struct {
	role     Role
	name     string
	port     int
	resolver *net.Resolver
}

// DNS is the source of role's workers at the addresses name resolves to
// (A and AAAA), each on port. A nil resolver is net.DefaultResolver. Give
// the name with a trailing dot to skip the resolver's search domains.
func DNS(role Role, name string, port int, r *net.Resolver) *DNSSource {
	if r == nil {
		r = net.DefaultResolver
	}
	return &DNSSource{role: role, name: name, port: port, resolver: r}
}

// Validate reports an unknown role, an empty name or a port outside
// 1..65535.
func (d *DNSSource) Validate() error {
	switch {
	case !d.role.valid():
		return fmt.Errorf("fleet: dns %s: unknown role %q", net.JoinHostPort(d.name, strconv.Itoa(d.port)), d.role)
	case d.name == "":
		return fmt.Errorf("fleet: dns %s: empty name", d.role)
	case d.port < 1 || d.port > 65535:
		return fmt.Errorf("fleet: %s: port must be in 1..65535", d)
	}
	return nil
}

// Resolve looks the name up. A name that does not exist or has no address
// is an empty role (nil, nil); any other failure (no answer, a server
// error, ctx's end) is an error.
func (d *DNSSource) Resolve(ctx context.Context) ([]Worker, error) {
	addrs, err := d.resolver.LookupNetIP(ctx, "ip", d.name)
	if dnsErr := (*net.DNSError)(nil); errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	workers := make([]Worker, 0, len(addrs))
	for _, a := range addrs {
		addr := netip.AddrPortFrom(a.Unmap(), uint16(d.port)).String()
		workers = append(workers, NewWorker(d.role, addr))
	}
	return workers, nil
}

// String is "dns <role> <name>:<port>".
func (d *DNSSource) String() string {
	return "dns " + string(d.role) + " " + net.JoinHostPort(d.name, strconv.Itoa(d.port))
}

// Interface guards.
var (
	_ Source = (*StaticSource)(nil)
	_ Source = (*DNSSource)(nil)
)

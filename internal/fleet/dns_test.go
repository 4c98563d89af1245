//go:build linux

package fleet_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/fleet"
)

// TestDNSMembership runs the membership against a real DNS server: records
// added and removed while it runs show up at the next refresh, with an
// epoch bump and Check naming them.
func TestDNSMembership(t *testing.T) {
	t.Parallel()
	dns := startDNSMasq(t, "10.0.0.1 decode.fleet.test\n")
	r := dns.resolver()
	m := newMembership(t, fleet.Options{},
		fleet.DNS(fleet.Decode, "decode.fleet.test.", 8000, r),
		fleet.DNS(fleet.Prefill, "prefill.fleet.test.", 8100, r))
	dec1 := fleet.NewWorker(fleet.Decode, "10.0.0.1:8000")
	dec2 := fleet.NewWorker(fleet.Decode, "10.0.0.2:8000")
	dec6 := fleet.NewWorker(fleet.Decode, "[fd00::5]:8000")
	pre := fleet.NewWorker(fleet.Prefill, "10.0.1.1:8100")

	assert.Equal(t, fleet.Snapshot{Epoch: 1, Workers: []fleet.Worker{dec1}}, refresh(t, m),
		"prefill.fleet.test does not exist: an empty role, not an error")

	dns.setHosts(t, "10.0.0.1 decode.fleet.test\n10.0.0.2 decode.fleet.test\nfd00::5 decode.fleet.test\n10.0.1.1 prefill.fleet.test\n")
	assert.Equal(t, fleet.Snapshot{Epoch: 2, Workers: []fleet.Worker{dec1, dec2, dec6, pre}}, refresh(t, m), "A and AAAA records")
	assert.Equal(t, uint64(2), refresh(t, m).Epoch, "the same answer keeps the epoch")
	var stale *fleet.StaleEpochError
	require.ErrorAs(t, m.Check(1), &stale)
	assert.Equal(t, []fleet.Worker{dec2, dec6, pre}, stale.Added)

	dns.setHosts(t, "10.0.0.2 decode.fleet.test\nfd00::5 decode.fleet.test\n10.0.1.1 prefill.fleet.test\n")
	assert.Equal(t, fleet.Snapshot{Epoch: 3, Workers: []fleet.Worker{dec2, dec6, pre}}, refresh(t, m))
	require.ErrorAs(t, m.Check(2), &stale)
	assert.EqualError(t, stale, "fleet: stale epoch 2 (current 3): removed decode/10.0.0.1:8000")

	dns.setHosts(t, "10.0.0.2 decode.fleet.test\nfd00::5 decode.fleet.test\n")
	assert.Equal(t, fleet.Snapshot{Epoch: 4, Workers: []fleet.Worker{dec2, dec6}}, refresh(t, m),
		"the last prefill record gone: the role is empty")
}

// TestDNSFailureKeepsLastGoodAnswer: a DNS server that stops answering or
// answers with an error leaves the role as it was, and says so.
func TestDNSFailureKeepsLastGoodAnswer(t *testing.T) {
	t.Parallel()
	dns := startDNSMasq(t, "10.0.0.1 decode.fleet.test\n")
	var down atomic.Bool
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		if down.Load() {
			return nil, errors.New("dial refused by the test")
		}
		return dns.resolver().Dial(ctx, network, address)
	}}
	m := newMembership(t, fleet.Options{}, fleet.DNS(fleet.Decode, "decode.fleet.test.", 8000, r))
	want := fleet.Snapshot{Epoch: 1, Workers: []fleet.Worker{fleet.NewWorker(fleet.Decode, "10.0.0.1:8000")}}
	require.Equal(t, want, refresh(t, m))

	down.Store(true)
	s, err := m.Refresh(t.Context())
	var dnsErr *net.DNSError
	require.ErrorAs(t, err, &dnsErr)
	assert.False(t, dnsErr.IsNotFound, "no answer is not an empty role")
	assert.ErrorContains(t, err, "fleet: dns decode decode.fleet.test.:8000: lookup decode.fleet.test.")
	assert.Equal(t, want, s)

	down.Store(false)
	dns.setHosts(t, "10.0.0.2 decode.fleet.test\n")
	assert.Equal(t, uint64(2), refresh(t, m).Epoch, "answers again")

	// A name outside fleet.test: dnsmasq has no upstream server and
	// refuses it; a refusal is an error too, not an empty role.
	refused := fleet.DNS(fleet.Encode, "encode.other.example.", 8000, dns.resolver())
	_, err = refused.Resolve(t.Context())
	require.ErrorAs(t, err, &dnsErr)
	assert.False(t, dnsErr.IsNotFound)
	assert.ErrorContains(t, err, "server misbehaving")
}

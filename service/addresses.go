package service

import "sync"

// Addresses records where the listeners bound once the app started; with a
// ":0" listen address that is how tests and tools find the port.
type Addresses struct {
	mu                  sync.Mutex
	rest, grpc, control string
}

// NewAddresses returns an empty record.
func NewAddresses() *Addresses { return &Addresses{} }

// SetREST records the REST listener's address.
func (a *Addresses) SetREST(addr string) { a.mu.Lock(); a.rest = addr; a.mu.Unlock() }

// SetGRPC records the gRPC listener's address.
func (a *Addresses) SetGRPC(addr string) { a.mu.Lock(); a.grpc = addr; a.mu.Unlock() }

// REST is the REST listener's address, "" before start.
func (a *Addresses) REST() string { a.mu.Lock(); defer a.mu.Unlock(); return a.rest }

// GRPC is the gRPC listener's address, "" before start.
func (a *Addresses) GRPC() string { a.mu.Lock(); defer a.mu.Unlock(); return a.grpc }

// SetControl records the control listener's address.
func (a *Addresses) SetControl(addr string) { a.mu.Lock(); a.control = addr; a.mu.Unlock() }

// Control is the control listener's address, "" before start or when off.
func (a *Addresses) Control() string { a.mu.Lock(); defer a.mu.Unlock(); return a.control }

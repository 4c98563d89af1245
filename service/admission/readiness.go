package admission

import (
	"sync/atomic"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// Readiness says whether the coordinator takes new requests: false while it
// starts and from the moment it begins to drain (decision D13). REST's
// /readyz and grpc.health.v1 both report it.
type Readiness struct {
	ready  atomic.Bool
	health *health.Server
}

// NewReadiness starts not ready.
func NewReadiness(h *health.Server) *Readiness {
	r := &Readiness{health: h}
	r.Set(false)
	return r
}

// Set changes readiness and the gRPC health status of the server and of
// CoordinatorService.
func (r *Readiness) Set(ready bool) {
	r.ready.Store(ready)
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ready {
		st = healthpb.HealthCheckResponse_SERVING
	}
	r.health.SetServingStatus("", st)
	r.health.SetServingStatus(coordinatorv1.CoordinatorService_ServiceDesc.ServiceName, st)
}

// Ready reports the current state.
func (r *Readiness) Ready() bool { return r.ready.Load() }

package steps

import "context"

// RequestStore is implemented by a step that queues requests and keeps
// their answers for a later fetch (async-broker). The service serves
// GetRequest and DeleteRequest from the pipeline's store
// (Pipeline.RequestStore), and the REST front registers
// /v1/requests/{id} only when there is one.
//
// Methods are safe for concurrent use. Store failures come back as
// answers (HTTP 500 with an error body), never as Go errors: what the
// client sees is the store's to decide.
type RequestStore interface {
	// TenantHeader is the lowercase name of the header (call metadata on
	// gRPC) that names the tenant; "" as a value means the default tenant.
	TenantHeader() string
	// Lookup answers a fetch of request id for tenant: the stored result,
	// 202 pending while it runs, or 410 when the id is unknown, expired,
	// deleted or another tenant's.
	Lookup(ctx context.Context, tenant, id string) Answer
	// Delete drops the stored result of request id for tenant: 204, also
	// when there was none.
	Delete(ctx context.Context, tenant, id string) Answer
}

// Answer is a whole HTTP answer: status, content type and body (empty for
// 204).
type Answer struct {
	Status      int
	ContentType string
	Body        []byte
}

package steps

import "context"

// RequestStore is implemented by a step that queues requests and keeps
// their answers for a later fetch (async-broker). The service serves
// GetRequest and DeleteRequest from the pipeline's store
// (Pipeline.RequestStore), and the REST front registers
// /v1/requests/{id} only when there is one.
//
// Methods are safe for concurrent use. Store failures come back as
// answers (a Refusal, HTTP 500), never as Go errors: what the client sees
// is the store's to decide.
type RequestStore interface {
	// TenantHeader is the lowercase name of the header (call metadata on
	// gRPC) that names the tenant; "" as a value means the default tenant.
	TenantHeader() string
	// Lookup answers a fetch of request id for tenant: the stored result,
	// 202 pending while it runs, or a refusal: 410 when the id is unknown,
	// expired, deleted or another tenant's, a stored failure, or the
	// store's own.
	Lookup(ctx context.Context, tenant, id string) Answer
	// Delete drops the stored result of request id for tenant: 204, also
	// when there was none; a failure is a refusal.
	Delete(ctx context.Context, tenant, id string) Answer
}

// Answer is a whole HTTP answer: status, content type and body (empty for
// 204), or a refusal the service frames.
type Answer struct {
	Status      int
	ContentType string
	Body        []byte
	// Refusal, when set, is the answer: Status is its status, ContentType
	// and Body are empty, and the service frames it (see Refusal).
	Refusal *Refusal
}

// Package inproc is an in-process gRPC transport: a Channel is a
// grpc.ClientConnInterface that runs a service's interceptors and handlers
// in the caller's process, as a network call would but without HTTP/2 or
// serialisation. The REST front reaches CoordinatorService through it and
// hands it the body it parsed (WithParsedBody).
package inproc

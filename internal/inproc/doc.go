// Package inproc is an in-process gRPC transport: a Channel is a
// grpc.ClientConnInterface that runs a service's interceptors and handlers
// in the caller's process, as a network call would but without HTTP/2 or
// serialisation. It knows no service: the REST front reaches
// CoordinatorService through it, and a caller that built its messages
// itself hands them over by reference (HandOver, Options.Pass).
package inproc

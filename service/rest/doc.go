// Package rest is the coordinator's REST front: OpenAI's and Anthropic's
// HTTP APIs, the only place that knows HTTP and their framing. It reads and
// checks each inference request (the body within its cap and the memory
// budget, parsed once), then hands it to the grpc-gateway handler of
// Generate or, with "stream": true, of GenerateStream (a token count,
// /v1/messages/count_tokens or /v1/responses/input_tokens: of
// CountTokens, count.go), which calls
// CoordinatorService through the in-process channel (internal/inproc), so
// the gRPC interceptors (admission, logging, recovery) run for REST as for
// gRPC clients. Everything else (passthrough paths, health, metrics, the
// queued requests) it serves itself.
//
// # The seam between REST and gRPC
//
// Every grpc-gateway option is set in one place (seam.go:
// newGatewayMux). What crosses the seam, each way:
//
//	concern        REST in → gRPC                                   gRPC → REST out
//	-------------  -----------------------------------------------  ------------------------------------------------
//	route          the route's binding (seam.go: bindingOf): the    —
//	               HTTP rule's path, openai.endpoint and the
//	               request id in the query (query.go: frontQuery)
//	headers        the header policy (internal/headers/policy.go:   the worker's headers and Server-Timing, by the
//	               MetadataKey): what a leg may receive, as         same policy (headers.ResponseKey); trailers are
//	               metadata; routing headers too, which the         dropped
//	               service drops unless trusted (D24)
//	body           the client's bytes as openai.json, untouched;    a whole answer's bytes as the worker sent them
//	               the one parse rides along on the call's          (marshaler.go: rawJSON), its status and content
//	               context (internal/frontdoor.Call), the message   type from the answer (seam.go: forwardStatus)
//	               itself handed over by reference
//	status         —                                                a gRPC status → HTTP status and the API's error
//	                                                                JSON (errors.go: gatewayError → service/apierror:
//	                                                                status_table.go, openai.go, dialect.go)
//	stream         "stream" decided once, by the document           each GenerateStreamResponse → server-sent events
//	               (requestbody.Document.Stream) → GenerateStream   (sse.go: marshalEvents); an error before the
//	                                                                first event → the REST status (streamError),
//	                                                                after it → the API's error event
//	count          a count route (count.go: handleCount) →          the count's answer bytes, in the API's shape
//	               CountTokens, "stream" not read                   (CountTokensResponse.openai; rawJSON)
//
// The front and the gateway's handlers share one request's state (call:
// id, error dialect, a stream's early error) through its context
// (withCall, callOf); the service finds the front's parse with
// frontdoor.ParsedBody.
package rest

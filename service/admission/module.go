package admission

import "go.uber.org/fx"

// Module provides the Controller of server.* limits and drain, and the
// Readiness both front doors report.
var Module = fx.Module("admission",
	fx.Provide(New, NewReadiness),
)

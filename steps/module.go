package steps

import "go.uber.org/fx"

// Module provides the step types of this package to the "steps" group. A
// step type is added by adding its constructor here (or, for a step with a
// package of its own such as steps/asyncbroker, that package's Module to
// cmd/coordinator's list); no other step changes.
var Module = fx.Module("steps",
	fx.Provide(
		AsPlugin(NewReplaceMediaURLsPlugin),
		AsPlugin(NewRenderPlugin),
		AsPlugin(NewConditionalDecodePlugin),
		AsPlugin(NewEncodePlugin),
		AsPlugin(NewPrefillPlugin),
		AsPlugin(NewDecodePlugin),
	),
)

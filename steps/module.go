package steps

import "go.uber.org/fx"

// Module provides the built-in step types to the "steps" group. A step
// type is added by adding its constructor here; no other step changes.
var Module = fx.Module("steps",
	fx.Provide(
		AsPlugin(NewAsyncBrokerPlugin),
		AsPlugin(NewReplaceMediaURLsPlugin),
		AsPlugin(NewRenderPlugin),
		AsPlugin(NewConditionalDecodePlugin),
		AsPlugin(NewEncodePlugin),
		AsPlugin(NewPrefillPlugin),
		AsPlugin(NewDecodePlugin),
	),
)

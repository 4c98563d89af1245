package builtin

import (
	"go.uber.org/fx"

	"github.com/coordinator-project/coordinator/steps"
)

// Module provides the step types of this package to the "steps" group. A
// step type is added by adding its constructor here (or, for a step with a
// package of its own such as steps/asyncbroker, that package's Module to
// cmd/coordinator's list); no other step changes.
var Module = fx.Module("steps",
	fx.Provide(
		steps.AsPlugin(NewReplaceMediaURLsPlugin),
		steps.AsPlugin(NewRenderPlugin),
		steps.AsPlugin(NewConditionalDecodePlugin),
		steps.AsPlugin(NewEncodePlugin),
		steps.AsPlugin(NewPrefillPlugin),
		steps.AsPlugin(NewDecodePlugin),
	),
)

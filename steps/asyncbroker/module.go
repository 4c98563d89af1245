package asyncbroker

import (
	"go.uber.org/fx"

	"github.com/coordinator-project/coordinator/steps"
)

// Module provides the async-broker step type to the "steps" group.
var Module = fx.Module("asyncbroker",
	fx.Provide(steps.AsPlugin(NewPlugin)),
)

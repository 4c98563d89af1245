package ec

import "go.uber.org/fx"

// Module provides the built-in EC connectors, in the "ec_connectors" group,
// and the *Set that indexes the group.
var Module = fx.Module("ec_connectors",
	fx.Provide(
		AsConnector(NewNIXL),
		AsConnector(NewSharedStorage),
		fx.Annotate(NewSet, fx.ParamTags(`group:"ec_connectors"`)),
	),
)

// AsConnector annotates a constructor returning a concrete connector so fx
// puts its result, as a Connector, in the "ec_connectors" group.
func AsConnector(constructor any) any {
	return fx.Annotate(constructor,
		fx.As(new(Connector)),
		fx.ResultTags(`group:"ec_connectors"`),
	)
}

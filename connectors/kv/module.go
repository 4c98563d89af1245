package kv

import (
	"os"

	"go.uber.org/fx"
)

// Module provides the built-in KV connectors, in the "kv_connectors" group,
// and the *Set that indexes the group. Reading SGLangPortEnv happens here,
// once; a bad value fails startup.
var Module = fx.Module("kv_connectors",
	fx.Provide(
		AsConnector(NewNIXL),
		AsConnector(NewSharedStorage),
		AsConnector(newSGLangFromEnv),
		fx.Annotate(NewSet, fx.ParamTags(`group:"kv_connectors"`)),
	),
)

// AsConnector annotates a constructor returning a concrete connector so fx
// puts its result, as a Connector, in the "kv_connectors" group.
func AsConnector(constructor any) any {
	return fx.Annotate(constructor,
		fx.As(new(Connector)),
		fx.ResultTags(`group:"kv_connectors"`),
	)
}

func newSGLangFromEnv() (*SGLang, error) {
	port, err := SGLangPortFromEnv(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	return NewSGLang(port), nil
}

// Package connectors holds what the KV (connectors/kv) and EC (connectors/ec)
// transfer connectors share: looking a configured connector up by name, and
// reading and writing transfer-param objects with their values kept opaque.
package connectors

import (
	"fmt"
	"slices"
	"strings"
)

// Named is anything with a config name.
type Named interface {
	Name() string
}

// Set is the connectors of one kind known to the app, by name.
type Set[C Named] struct {
	key    string // config key that names a connector, e.g. "kv_connector"
	def    string // name used when the config names none
	byName map[string]C
}

// NewSet indexes connectors by name; two with one name are an error. key is
// the config key that selects one (used in errors), def the default name.
func NewSet[C Named](key, def string, connectors []C) (*Set[C], error) {
	s := &Set[C]{key: key, def: def, byName: make(map[string]C, len(connectors))}
	for _, c := range connectors {
		if _, dup := s.byName[c.Name()]; dup {
			return nil, fmt.Errorf("%s %q registered twice", key, c.Name())
		}
		s.byName[c.Name()] = c
	}
	if _, ok := s.byName[def]; !ok {
		return nil, fmt.Errorf("%s: default %q is not registered", key, def)
	}
	return s, nil
}

// Get returns the connector called name; "" means the default.
func (s *Set[C]) Get(name string) (C, error) {
	if name == "" {
		name = s.def
	}
	c, ok := s.byName[name]
	if !ok {
		return c, fmt.Errorf("unknown %s: %q (known: %s)", s.key, name, strings.Join(s.Names(), ", "))
	}
	return c, nil
}

// Names lists the known connector names, sorted.
func (s *Set[C]) Names() []string {
	names := make([]string, 0, len(s.byName))
	for n := range s.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix starts the name of every environment override: the key path
// upper-cased with "." replaced by "_", e.g. COORDINATOR_SERVER_LISTEN_ADDR for
// server.listen_addr. Every scalar key can be overridden, whether or not the
// file sets it; an empty variable counts as unset; pipeline.steps cannot be
// set from the environment. The environment wins over the file.
const EnvPrefix = "COORDINATOR_"

// EnvName is the environment variable that overrides the key path, e.g.
// "server.max_request_body_size".
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

var durationType = reflect.TypeFor[time.Duration]()

// applyEnv overrides the scalar fields of cfg from lookupEnv.
func applyEnv(cfg *Config, lookupEnv func(string) (string, bool)) error {
	return envStruct("", reflect.ValueOf(cfg).Elem(), lookupEnv)
}

func envStruct(path string, v reflect.Value, lookupEnv func(string) (string, bool)) error {
	for i := range v.NumField() {
		key := path + v.Type().Field(i).Tag.Get("param")
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Struct:
			if err := envStruct(key+".", f, lookupEnv); err != nil {
				return err
			}
			continue
		case reflect.Slice, reflect.Map:
			continue // pipeline.steps
		}
		name := EnvName(key)
		s, ok := lookupEnv(name)
		if !ok || s == "" {
			continue
		}
		target := f
		if f.Kind() == reflect.Pointer { // an optional scalar: set means present
			target = reflect.New(f.Type().Elem()).Elem()
		}
		if err := setScalar(target, s); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if f.Kind() == reflect.Pointer {
			f.Set(target.Addr())
		}
	}
	return nil
}

// setScalar parses s by the type of the field v.
func setScalar(v reflect.Value, s string) error {
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("expected a duration like %q, got %q", "30s", s)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.Int:
		n, err := strconv.ParseInt(s, 10, 0)
		if err != nil {
			return fmt.Errorf("expected an integer, got %q", s)
		}
		v.SetInt(n)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("expected true or false, got %q", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("expected a number, got %q", s)
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("unsupported field type %s", v.Type())
	}
	return nil
}

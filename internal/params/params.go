// Package params decodes a pipeline step's free-form params map, as the YAML
// loader produced it, into a typed struct, strictly.
//
// A destination struct names its keys with `param:"key"` tags on exported
// fields; untagged fields and fields tagged `param:"-"` are not decoded.
// Supported field types: string, bool, every int and uint size, float32,
// float64, time.Duration, structs (from maps), slices (from lists), maps with
// string keys (from maps), interface fields (raw value kept), and pointers to
// any of these (set only when the key is present, so "absent" stays nil).
//
// Every error names the offending key path, dotted and indexed
// (`routes[2].timeouts.connect: ...`), and reads as one line.
package params

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// injected are the keys the pipeline builder adds to every step's params
// (compat §2.3 point 2). Decode accepts them silently at the top level of a
// struct that does not declare them.
var injected = [...]string{"kv_connector", "ec_connector", "use_openai_format"}

var durationType = reflect.TypeFor[time.Duration]()

// Decode copies raw into dst, a pointer to a struct whose exported fields
// carry `param:"key"` tags.
//
// Absent keys leave the field as it is (so callers set defaults first); a nil
// raw map is a no-op. Nested structs are decoded into their current value, so
// their defaults survive too; slices and maps are replaced whole. A YAML null
// counts as absent for struct, slice, map and interface fields (and pointers
// to them) and is an error for scalars. Unknown keys are errors, except
// kv_connector, ec_connector and use_openai_format at the top level, which the
// pipeline builder injects into every step. Keys are visited in sorted order
// and the first error is returned; dst may be partly written when it fails.
func Decode(raw map[string]any, dst any) error {
	v, err := target(dst)
	if err != nil {
		return err
	}
	return decodeStruct("", raw, v, true)
}

// DecodeExact is Decode without the exemption for the injected step keys: for
// maps that are not step params, such as the root config file.
func DecodeExact(raw map[string]any, dst any) error {
	v, err := target(dst)
	if err != nil {
		return err
	}
	return decodeStruct("", raw, v, false)
}

func target(dst any) (reflect.Value, error) {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, fmt.Errorf("params: destination must be a non-nil pointer to a struct, got %T", dst)
	}
	return v.Elem(), nil
}

// decodeStruct decodes the map m into the struct v; path is v's key path.
// allowInjected exempts the injected keys when they are not fields of v.
func decodeStruct(path string, m map[string]any, v reflect.Value, allowInjected bool) error {
	fields := fieldsOf(v.Type())
	for _, key := range slices.Sorted(maps.Keys(m)) {
		i, ok := fields[key]
		if !ok {
			if allowInjected && slices.Contains(injected[:], key) {
				continue
			}
			return fail(path, "unknown key %q (known: %s)", key,
				strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
		}
		if err := decodeValue(join(path, key), m[key], v.Field(i)); err != nil {
			return err
		}
	}
	return nil
}

// fieldsOf maps each tagged exported field's key to its index.
func fieldsOf(t reflect.Type) map[string]int {
	fields := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		key := f.Tag.Get("param")
		if !f.IsExported() || key == "" || key == "-" {
			continue
		}
		fields[key] = i
	}
	return fields
}

// decodeValue stores val into v, converting it by v's type.
func decodeValue(path string, val any, v reflect.Value) error {
	if val == nil {
		return decodeNull(path, v)
	}
	switch {
	case v.Type() == durationType:
		return decodeDuration(path, val, v)
	case v.CanInt() || v.CanUint():
		return decodeInt(path, val, v)
	}
	switch v.Kind() {
	case reflect.String, reflect.Bool, reflect.Float32, reflect.Float64:
		return decodeScalar(path, val, v)
	case reflect.Struct:
		m, ok := val.(map[string]any)
		if !ok {
			return fail(path, "expected a map, got %s", kindOf(val))
		}
		return decodeStruct(path, m, v, false)
	case reflect.Slice:
		return decodeSlice(path, val, v)
	case reflect.Map:
		return decodeMap(path, val, v)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if !v.IsNil() {
			p.Elem().Set(v.Elem()) // start from the current value, without sharing it
		}
		if err := decodeValue(path, val, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
	case reflect.Interface:
		rv := reflect.ValueOf(val)
		if !rv.Type().AssignableTo(v.Type()) {
			return fail(path, "expected %s, got %s", v.Type(), kindOf(val))
		}
		v.Set(rv)
	default:
		return fail(path, "params: unsupported field type %s", v.Type())
	}
	return nil
}

// decodeNull decodes a YAML null into v.
func decodeNull(path string, v reflect.Value) error {
	switch v.Kind() {
	case reflect.Struct, reflect.Slice, reflect.Map, reflect.Interface:
		return nil // an empty YAML section: leave the field as it is
	case reflect.Pointer: // absent if null is absent for the pointee
		return decodeValue(path, nil, reflect.New(v.Type().Elem()).Elem())
	}
	return fail(path, "expected %s, got null", expected(v.Type()))
}

// decodeScalar decodes a string, bool or float field.
func decodeScalar(path string, val any, v reflect.Value) error {
	switch v.Kind() {
	case reflect.String:
		s, ok := val.(string)
		if !ok {
			return fail(path, "expected string, got %s", kindOf(val))
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := val.(bool)
		if !ok {
			return fail(path, "expected bool, got %s", kindOf(val))
		}
		v.SetBool(b)
	default:
		f, ok := toFloat(val)
		if !ok {
			return fail(path, "expected number, got %s", kindOf(val))
		}
		if v.OverflowFloat(f) {
			return fail(path, "out of range for %s, got %v", v.Type(), f)
		}
		v.SetFloat(f)
	}
	return nil
}

func decodeDuration(path string, val any, v reflect.Value) error {
	s, ok := val.(string)
	d, err := time.ParseDuration(s)
	if !ok || err != nil {
		return fail(path, "expected a duration string like %q, got %s", "30s", show(val))
	}
	v.SetInt(int64(d))
	return nil
}

// decodeInt accepts Go integers, integral floats (8192.0) and json.Number.
func decodeInt(path string, val any, v reflect.Value) error {
	rv := reflect.ValueOf(val)
	switch {
	case rv.CanInt():
		return setInt(path, v, rv.Int())
	case rv.CanUint():
		return setUint(path, v, rv.Uint())
	}
	if n, ok := val.(json.Number); ok {
		if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return setInt(path, v, i)
		}
		if u, err := strconv.ParseUint(n.String(), 10, 64); err == nil {
			return setUint(path, v, u)
		}
	}
	f, ok := toFloat(val)
	switch {
	case !ok:
		return fail(path, "expected number, got %s", kindOf(val))
	case f != math.Trunc(f): // also NaN
		return fail(path, "expected integer, got %v", f)
	case f >= -0x1p63 && f < 0x1p63:
		return setInt(path, v, int64(f))
	case f >= 0 && f < 0x1p64:
		return setUint(path, v, uint64(f))
	}
	return fail(path, "out of range for %s, got %v", v.Type(), f)
}

// setInt stores i into the int or uint field v, range-checked.
func setInt(path string, v reflect.Value, i int64) error {
	switch {
	case v.CanInt() && !v.OverflowInt(i):
		v.SetInt(i)
	case v.CanUint() && i >= 0 && !v.OverflowUint(uint64(i)):
		v.SetUint(uint64(i))
	default:
		return fail(path, "out of range for %s, got %d", v.Type(), i)
	}
	return nil
}

// setUint stores u into the int or uint field v, range-checked.
func setUint(path string, v reflect.Value, u uint64) error {
	switch {
	case v.CanUint() && !v.OverflowUint(u):
		v.SetUint(u)
	case v.CanInt() && u <= math.MaxInt64 && !v.OverflowInt(int64(u)):
		v.SetInt(int64(u))
	default:
		return fail(path, "out of range for %s, got %d", v.Type(), u)
	}
	return nil
}

func toFloat(val any) (float64, bool) {
	rv := reflect.ValueOf(val)
	switch {
	case rv.CanFloat():
		return rv.Float(), true
	case rv.CanInt():
		return float64(rv.Int()), true
	case rv.CanUint():
		return float64(rv.Uint()), true
	}
	if n, ok := val.(json.Number); ok {
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// decodeSlice replaces the slice v with the decoded elements of the list val.
func decodeSlice(path string, val any, v reflect.Value) error {
	rv := reflect.ValueOf(val)
	if rv.Kind() != reflect.Slice {
		return fail(path, "expected %s, got %s", expected(v.Type()), kindOf(val))
	}
	out := reflect.MakeSlice(v.Type(), rv.Len(), rv.Len())
	for i := range rv.Len() {
		if err := decodeValue(fmt.Sprintf("%s[%d]", path, i), rv.Index(i).Interface(), out.Index(i)); err != nil {
			return err
		}
	}
	v.Set(out)
	return nil
}

// decodeMap replaces the string-keyed map v with the decoded entries of val.
func decodeMap(path string, val any, v reflect.Value) error {
	m, ok := val.(map[string]any)
	if !ok {
		return fail(path, "expected a map, got %s", kindOf(val))
	}
	t := v.Type()
	if t.Key().Kind() != reflect.String {
		return fail(path, "params: unsupported field type %s", t)
	}
	out := reflect.MakeMapWithSize(t, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		elem := reflect.New(t.Elem()).Elem()
		if err := decodeValue(join(path, k), m[k], elem); err != nil {
			return err
		}
		out.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), elem)
	}
	v.Set(out)
	return nil
}

// expected names what a field of type t accepts, for error messages.
func expected(t reflect.Type) string {
	switch k := t.Kind(); {
	case t == durationType:
		return "a duration string"
	case k == reflect.String, k == reflect.Bool:
		return k.String()
	case k >= reflect.Int && k <= reflect.Uintptr:
		return "integer"
	case k == reflect.Float32, k == reflect.Float64:
		return "number"
	case k == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "a list of strings"
	case k == reflect.Slice:
		return "a list"
	case k == reflect.Pointer:
		return expected(t.Elem())
	}
	return "a map"
}

// kindOf names the YAML kind of a raw value: int, float, string, list, ...
func kindOf(val any) string {
	if _, ok := val.(json.Number); ok {
		return "number"
	}
	rv := reflect.ValueOf(val)
	switch {
	case val == nil:
		return "null"
	case rv.CanInt() || rv.CanUint():
		return "int"
	case rv.CanFloat():
		return "float"
	}
	switch rv.Kind() {
	case reflect.String, reflect.Bool, reflect.Map:
		return rv.Kind().String()
	case reflect.Slice, reflect.Array:
		return "list"
	}
	return fmt.Sprintf("%T", val)
}

// show renders a scalar's value (strings quoted) and names any other kind.
func show(val any) string {
	switch x := val.(type) {
	case string:
		return strconv.Quote(x)
	case json.Number:
		return x.String()
	}
	switch kindOf(val) {
	case "int", "float", "bool":
		return fmt.Sprint(val)
	}
	return kindOf(val)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fail formats an error, prefixed by the key path when there is one.
func fail(path, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if path == "" {
		return errors.New(msg)
	}
	return errors.New(path + ": " + msg)
}

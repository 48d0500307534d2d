package contract

import (
	"reflect"
	"slices"
	"strings"
)

// commonNames maps field names people and agents naturally send to the
// protocol's own, so an unknown field can be answered with the one meant.
var commonNames = map[string]string{
	"device":     "model",
	"devicetype": "model",
	"os":         "osVersion",
	"version":    "osVersion",
	"runtime":    "osVersion",
	"ttl":        "ttlMs",
	"timeout":    "timeoutMs",
	"type":       "class",
	"lease":      "leaseId",
	"request":    "requestId",
	"wait":       "waitSeconds",
}

// didYouMean names the field of v (a pointer to a struct) that the unknown
// field name most likely meant, or "": the same name in another case or
// spelling (osversion, os_version, ttl-ms), or a common synonym.
func didYouMean(name string, v any) string {
	known := jsonFields(v)
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(s))
	}
	n := norm(name)
	for _, f := range known {
		if norm(f) == n {
			return f
		}
	}
	if f, ok := commonNames[n]; ok && slices.Contains(known, f) {
		return f
	}
	return ""
}

// jsonFields lists the JSON names of v's top-level fields.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-":
			continue
		case f.Anonymous && name == "":
			out = append(out, jsonFields(reflect.New(f.Type).Interface())...)
			continue
		case name == "":
			name = f.Name
		}
		if f.IsExported() {
			out = append(out, name)
		}
	}
	return out
}

// Package openapi writes an OpenAPI 3.1 document from a description of the
// operations of an HTTP API and the Go types of their bodies, read by
// reflection the way encoding/json reads them. It serves no requests and
// holds no state: Build is a pure function of its Spec, and its output is
// deterministic (object keys sorted, components named stably), so the
// document can be checked in and compared byte for byte. It is safe to call
// concurrently.
//
// Schemas follow encoding/json: a field's name is its json tag's; a field
// with omitempty or omitzero is not required (and, being left out when
// empty, never null), one without it is required, and a pointer, slice or
// map without it may be null; an embedded struct's fields are promoted;
// json.RawMessage and interfaces are any value; time.Time is a date-time
// string. A named struct type (or a named type with an enum) is a component
// under #/components/schemas, by its Go name (capitalised, and prefixed
// with its package's name when two packages use one name), and referred to
// by $ref. A type whose JSON is written by its own MarshalJSON is described
// by Spec.Overrides, or else is any value.
package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Schema is a JSON Schema (2020-12, the dialect of OpenAPI 3.1) as the
// document writes it.
type Schema = map[string]any

// Spec is what a document is built from.
type Spec struct {
	Title, Version, Description string
	// Servers are the document's server URLs, if any.
	Servers []string
	// SecuritySchemes are the HTTP bearer schemes by name, each with its
	// description.
	SecuritySchemes map[string]string
	Operations      []Operation
	// Enums are the closed sets of named string types.
	Enums map[reflect.Type][]string
	// FieldEnums closes a plain string field of a struct: by the struct's
	// type, then the field's JSON name.
	FieldEnums map[reflect.Type]map[string][]string
	// Overrides describe types whose JSON is their own (a MarshalJSON),
	// each becoming a component with this schema.
	Overrides map[reflect.Type]Schema
	// Extra are types written as components whether or not an operation
	// reaches them (an override refers to them by name).
	Extra []reflect.Type
	// ErrorStatus maps an error code to its HTTP status; ErrorType is the
	// Go type of the error body.
	ErrorStatus func(code string) int
	ErrorType   reflect.Type
}

// Operation is one method on one path.
type Operation struct {
	Method, Path             string
	ID, Summary, Description string
	Tags                     []string
	// Security lists the schemes any one of which admits a caller; empty,
	// the operation is public (security: []). AnonymousToo adds the empty
	// requirement: a caller without a token may be admitted too.
	Security     []string
	AnonymousToo bool
	Params       []Param
	Request      *Body
	Responses    []Response
	// Errors are the error codes the operation may answer, each under its
	// HTTP status with the error body.
	Errors []string
}

// Param is a path, query or header parameter.
type Param struct {
	Name, In, Description string
	Required              bool
	// Type is the parameter's Go type; nil is a string.
	Type reflect.Type
	// Enum closes a string parameter.
	Enum []string
}

// Body is a request or response body.
type Body struct {
	// ContentType is the media type; "" is application/json.
	ContentType string
	// Type is the JSON body's Go type; nil with a non-JSON ContentType is
	// bytes, with JSON any value. AnyOf lists alternatives instead.
	Type  reflect.Type
	AnyOf []reflect.Type
	// Events are an event stream's events (ContentType text/event-stream).
	Events      []Event
	Description string
	Required    bool
}

// Event is one named event of a Server-Sent Events stream and the Go type
// of its JSON data. The name "message" is an event sent without an event
// field.
type Event struct {
	Name        string
	Type        reflect.Type
	Description string
}

// Response is one success answer of an operation.
type Response struct {
	Status      int
	Description string
	// Bodies are the answer's media types; none is an answer without a
	// body.
	Bodies []Body
	// Headers are the response headers it sets, name to description.
	Headers map[string]string
}

// EventStream is the media type of a Server-Sent Events stream.
const EventStream = "text/event-stream"

// Build writes the document of spec as indented JSON ending in a newline.
func Build(spec Spec) ([]byte, error) {
	b := &builder{spec: spec, names: map[reflect.Type]string{}, schemas: map[string]Schema{}}
	if err := b.nameTypes(); err != nil {
		return nil, err
	}
	paths := map[string]any{}
	ids := map[string]bool{}
	for _, op := range spec.Operations {
		if op.ID == "" || ids[op.ID] {
			return nil, fmt.Errorf("openapi: operation %s %s: missing or repeated operation id %q", op.Method, op.Path, op.ID)
		}
		ids[op.ID] = true
		item, _ := paths[op.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[op.Path] = item
		}
		m := strings.ToLower(op.Method)
		if _, dup := item[m]; dup {
			return nil, fmt.Errorf("openapi: %s %s is described twice", op.Method, op.Path)
		}
		o, err := b.operation(op)
		if err != nil {
			return nil, fmt.Errorf("openapi: %s %s: %w", op.Method, op.Path, err)
		}
		item[m] = o
	}
	schemes := map[string]any{}
	for name, desc := range spec.SecuritySchemes {
		schemes[name] = map[string]any{"type": "http", "scheme": "bearer", "description": desc}
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       spec.Title,
			"version":     spec.Version,
			"description": spec.Description,
		},
		"paths": paths,
		"components": map[string]any{
			"schemas":         b.schemas,
			"securitySchemes": schemes,
		},
	}
	if len(spec.Servers) > 0 {
		var servers []any
		for _, u := range spec.Servers {
			servers = append(servers, map[string]any{"url": u})
		}
		doc["servers"] = servers
	}
	for _, t := range spec.Extra {
		b.ref(t)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("openapi: encode: %w", err)
	}
	return buf.Bytes(), nil
}

type builder struct {
	spec Spec
	// names are the component names of the named types the document uses.
	names map[reflect.Type]string
	// schemas are the components written so far, by name.
	schemas map[string]Schema
}

// nameTypes finds every named type the operations reach and gives each its
// component name: its Go name, capitalised, or with its package's name
// before it where two packages share a name.
func (b *builder) nameTypes() error {
	seen := map[reflect.Type]bool{}
	var found []reflect.Type
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if t == nil || seen[t] {
			return
		}
		seen[t] = true
		if b.component(t) {
			found = append(found, t)
		}
		if _, ok := b.spec.Overrides[t]; ok {
			return
		}
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			walk(t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				walk(t.Field(i).Type)
			}
		}
	}
	for _, op := range b.spec.Operations {
		for _, p := range op.Params {
			walk(p.Type)
		}
		bodies := []*Body{op.Request}
		for i := range op.Responses {
			for j := range op.Responses[i].Bodies {
				bodies = append(bodies, &op.Responses[i].Bodies[j])
			}
		}
		for _, body := range bodies {
			if body == nil {
				continue
			}
			walk(body.Type)
			for _, t := range body.AnyOf {
				walk(t)
			}
			for _, ev := range body.Events {
				walk(ev.Type)
			}
		}
	}
	walk(b.spec.ErrorType)
	for _, t := range b.spec.Extra {
		walk(t)
	}
	byShort := map[string][]reflect.Type{}
	for _, t := range found {
		short := exportName(t.Name())
		byShort[short] = append(byShort[short], t)
	}
	for short, ts := range byShort {
		if len(ts) == 1 {
			b.names[ts[0]] = short
			continue
		}
		for _, t := range ts {
			pkg := t.PkgPath()
			pkg = pkg[strings.LastIndex(pkg, "/")+1:]
			b.names[t] = exportName(pkg) + short
		}
	}
	taken := map[string]reflect.Type{}
	for t, n := range b.names {
		if o, dup := taken[n]; dup {
			return fmt.Errorf("openapi: %v and %v would both be component %s", t, o, n)
		}
		taken[n] = t
	}
	return nil
}

// component reports whether t is written as a component of its own.
func (b *builder) component(t reflect.Type) bool {
	if t.Name() == "" || t.PkgPath() == "" || t == timeType {
		return false
	}
	if _, ok := b.spec.Overrides[t]; ok {
		return true
	}
	if _, ok := b.spec.Enums[t]; ok {
		return true
	}
	return t.Kind() == reflect.Struct
}

// exportName makes a Go type name a component name: its first letter
// capitalised, anything but letters and digits (a generic's brackets)
// dropped.
func exportName(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return -1
	}, s)
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

var (
	timeType       = reflect.TypeFor[time.Time]()
	durationType   = reflect.TypeFor[time.Duration]()
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	marshalerType  = reflect.TypeFor[json.Marshaler]()
)

// ref is the schema of t where it is used: a $ref for a component, the
// schema itself for anything else.
func (b *builder) ref(t reflect.Type) Schema {
	if name, ok := b.names[t]; ok {
		if _, done := b.schemas[name]; !done {
			b.schemas[name] = Schema{} // placeholder: t may refer to itself
			b.schemas[name] = b.schema(t)
		}
		return Schema{"$ref": "#/components/schemas/" + name}
	}
	return b.schema(t)
}

// schema is t's own schema (not a reference to it).
func (b *builder) schema(t reflect.Type) Schema {
	if s, ok := b.spec.Overrides[t]; ok {
		return s
	}
	if vals, ok := b.spec.Enums[t]; ok {
		return Schema{"type": "string", "enum": sortedStrings(vals)}
	}
	switch t {
	case timeType:
		return Schema{"type": "string", "format": "date-time"}
	case durationType:
		return Schema{"type": "integer", "format": "int64", "description": "nanoseconds"}
	case rawMessageType:
		return Schema{}
	}
	if t.Kind() != reflect.Pointer && (t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)) {
		// Its JSON is its own, and no override says what it is.
		return Schema{}
	}
	switch t.Kind() {
	case reflect.Bool:
		return Schema{"type": "boolean"}
	case reflect.Int, reflect.Int64:
		return Schema{"type": "integer", "format": "int64"}
	case reflect.Int8, reflect.Int16, reflect.Int32:
		return Schema{"type": "integer", "format": "int32"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return Schema{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return Schema{"type": "number"}
	case reflect.String:
		return Schema{"type": "string"}
	case reflect.Interface:
		return Schema{}
	case reflect.Pointer:
		return b.ref(t.Elem())
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return Schema{"type": "string", "contentEncoding": "base64"}
		}
		return Schema{"type": "array", "items": b.ref(t.Elem())}
	case reflect.Map:
		return Schema{"type": "object", "additionalProperties": b.ref(t.Elem())}
	case reflect.Struct:
		return b.object(t)
	}
	return Schema{}
}

// field is one JSON member of a struct, after promotion.
type field struct {
	name      string
	typ       reflect.Type
	omit      bool // omitempty or omitzero: left out when empty
	asString  bool // the ",string" option
	depth     int
	viaPtr    bool // promoted through an embedded pointer: absent when nil
	tagged    bool
	fieldEnum []string
}

// fields lists t's JSON members by encoding/json's rules: exported fields,
// embedded structs' fields promoted, a shallower field (or, at one depth, a
// tagged one) hiding a deeper one of the same name.
func (b *builder) fields(t reflect.Type) []field {
	var all []field
	var walk func(t reflect.Type, depth int, viaPtr bool, visited map[reflect.Type]bool)
	walk = func(t reflect.Type, depth int, viaPtr bool, visited map[reflect.Type]bool) {
		if visited[t] {
			return
		}
		visited[t] = true
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := sf.Type
			if sf.Anonymous && name == "" {
				et, ptr := ft, false
				if et.Kind() == reflect.Pointer {
					et, ptr = et.Elem(), true
				}
				if et.Kind() == reflect.Struct {
					walk(et, depth+1, viaPtr || ptr, visited)
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			f := field{name: name, typ: ft, depth: depth, viaPtr: viaPtr, tagged: name != ""}
			if f.name == "" {
				f.name = sf.Name
			}
			for o := range strings.SplitSeq(opts, ",") {
				switch o {
				case "omitempty", "omitzero":
					f.omit = true
				case "string":
					f.asString = true
				}
			}
			if fe := b.spec.FieldEnums[t]; fe != nil {
				f.fieldEnum = fe[f.name]
			}
			all = append(all, f)
		}
	}
	walk(t, 0, false, map[reflect.Type]bool{})
	byName := map[string][]field{}
	var order []string
	for _, f := range all {
		if _, ok := byName[f.name]; !ok {
			order = append(order, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	var out []field
	for _, name := range order {
		fs := byName[name]
		sort.SliceStable(fs, func(i, j int) bool {
			if fs[i].depth != fs[j].depth {
				return fs[i].depth < fs[j].depth
			}
			return fs[i].tagged && !fs[j].tagged
		})
		if len(fs) > 1 && fs[0].depth == fs[1].depth && fs[0].tagged == fs[1].tagged {
			continue // ambiguous: encoding/json writes neither
		}
		out = append(out, fs[0])
	}
	return out
}

func (b *builder) object(t reflect.Type) Schema {
	props := map[string]any{}
	var required []string
	for _, f := range b.fields(t) {
		var s Schema
		switch {
		case f.asString:
			s = Schema{"type": "string"}
		case len(f.fieldEnum) > 0:
			s = Schema{"type": "string", "enum": sortedStrings(f.fieldEnum)}
		default:
			s = b.ref(f.typ)
		}
		if !f.omit && nullable(f.typ) && !b.overridden(f.typ) {
			s = orNull(s)
		}
		props[f.name] = s
		if !f.omit && !f.viaPtr {
			required = append(required, f.name)
		}
	}
	s := Schema{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Strings(required)
		s["required"] = required
	}
	return s
}

// overridden reports whether t (or what it points to) has an override,
// which says itself whether it may be null.
func (b *builder) overridden(t reflect.Type) bool {
	if _, ok := b.spec.Overrides[t]; ok {
		return true
	}
	return false
}

// nullable reports whether encoding/json may write null for a value of t.
func nullable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return t != rawMessageType
	}
	return false
}

// orNull lets s be null too.
func orNull(s Schema) Schema {
	if len(s) == 0 {
		return s // any value already
	}
	if typ, ok := s["type"].(string); ok && s["$ref"] == nil && s["enum"] == nil {
		c := Schema{}
		for k, v := range s {
			c[k] = v
		}
		c["type"] = []string{typ, "null"}
		return c
	}
	return Schema{"anyOf": []any{s, Schema{"type": "null"}}}
}

func sortedStrings(vals []string) []string {
	out := slices.Clone(vals)
	sort.Strings(out)
	return slices.Compact(out)
}

func (b *builder) operation(op Operation) (map[string]any, error) {
	o := map[string]any{"operationId": op.ID}
	if op.Summary != "" {
		o["summary"] = op.Summary
	}
	if op.Description != "" {
		o["description"] = op.Description
	}
	if len(op.Tags) > 0 {
		o["tags"] = op.Tags
	}
	sec := []any{}
	for _, name := range op.Security {
		if _, ok := b.spec.SecuritySchemes[name]; !ok {
			return nil, fmt.Errorf("unknown security scheme %q", name)
		}
		sec = append(sec, map[string]any{name: []string{}})
	}
	if op.AnonymousToo && len(sec) > 0 {
		sec = append(sec, map[string]any{})
	}
	o["security"] = sec
	var params []any
	for _, p := range pathParams(op.Path) {
		if !slices.ContainsFunc(op.Params, func(q Param) bool { return q.In == "path" && q.Name == p }) {
			op.Params = append(op.Params, Param{Name: p, In: "path", Required: true})
		}
	}
	for _, p := range op.Params {
		s := Schema{"type": "string"}
		if p.Type != nil {
			s = b.ref(p.Type)
		}
		if len(p.Enum) > 0 {
			s = Schema{"type": "string", "enum": sortedStrings(p.Enum)}
		}
		pm := map[string]any{"name": p.Name, "in": p.In, "schema": s}
		if p.Required || p.In == "path" {
			pm["required"] = true
		}
		if p.Description != "" {
			pm["description"] = p.Description
		}
		params = append(params, pm)
	}
	if len(params) > 0 {
		o["parameters"] = params
	}
	if op.Request != nil {
		rb := map[string]any{"content": b.content([]Body{*op.Request})}
		if op.Request.Required {
			rb["required"] = true
		}
		if op.Request.Description != "" {
			rb["description"] = op.Request.Description
		}
		o["requestBody"] = rb
	}
	responses := map[string]any{}
	for _, r := range op.Responses {
		key := strconv.Itoa(r.Status)
		if _, dup := responses[key]; dup {
			return nil, fmt.Errorf("status %d answered twice", r.Status)
		}
		desc := r.Description
		if desc == "" {
			desc = http.StatusText(r.Status)
		}
		rm := map[string]any{"description": desc}
		if len(r.Bodies) > 0 {
			rm["content"] = b.content(r.Bodies)
		}
		if len(r.Headers) > 0 {
			hs := map[string]any{}
			for name, d := range r.Headers {
				hs[name] = map[string]any{"description": d, "schema": Schema{"type": "string"}}
			}
			rm["headers"] = hs
		}
		responses[key] = rm
	}
	byStatus := map[int][]string{}
	for _, code := range op.Errors {
		st := b.spec.ErrorStatus(code)
		if !slices.Contains(byStatus[st], code) {
			byStatus[st] = append(byStatus[st], code)
		}
	}
	for st, codes := range byStatus {
		key := strconv.Itoa(st)
		if _, dup := responses[key]; dup {
			return nil, fmt.Errorf("status %d is both an answer and an error", st)
		}
		codes = sortedStrings(codes)
		responses[key] = map[string]any{
			"description":     "An error: " + strings.Join(codes, ", ") + ".",
			"x-simlock-codes": codes,
			"content": map[string]any{"application/json": map[string]any{
				"schema": b.ref(b.spec.ErrorType),
			}},
		}
	}
	o["responses"] = responses
	return o, nil
}

// pathParams lists the {names} of a path template.
func pathParams(path string) []string {
	var out []string
	for seg := range strings.SplitSeq(path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out = append(out, strings.TrimSuffix(seg[1:], "}"))
		}
	}
	return out
}

func (b *builder) content(bodies []Body) map[string]any {
	out := map[string]any{}
	for _, body := range bodies {
		ct := body.ContentType
		if ct == "" {
			ct = "application/json"
		}
		var s Schema
		switch {
		case ct == EventStream:
			s = b.events(body.Events)
		case len(body.AnyOf) > 0:
			var alts []any
			for _, t := range body.AnyOf {
				alts = append(alts, b.ref(t))
			}
			s = Schema{"anyOf": alts}
		case body.Type != nil:
			s = b.ref(body.Type)
		case ct == "application/json":
			s = Schema{}
		default:
			s = Schema{"type": "string", "contentMediaType": ct}
		}
		mt := map[string]any{"schema": s}
		out[ct] = mt
	}
	return out
}

// events describes one event of a stream: an object of the event's name
// and its data, one alternative per name, the data a JSON text whose
// schema is contentSchema.
func (b *builder) events(evs []Event) Schema {
	var alts []any
	for _, ev := range evs {
		alt := Schema{
			"type":     "object",
			"required": []string{"event", "data"},
			"properties": map[string]any{
				"event": Schema{"const": ev.Name},
				"id":    Schema{"type": "string"},
				"data": Schema{
					"type":             "string",
					"contentMediaType": "application/json",
					"contentSchema":    b.ref(ev.Type),
				},
			},
		}
		if ev.Description != "" {
			alt["description"] = ev.Description
		}
		alts = append(alts, alt)
	}
	return Schema{"oneOf": alts}
}

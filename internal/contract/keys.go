package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// encoding/json matches object keys to fields in any case and lets the
// last of two equal keys win. On the wire that is a second way to say a
// field ("TTLMS" for ttlMs) and a way to smuggle a value past whoever read
// the first copy, so every frame and input is checked first: each key as
// its field spells it, none twice.

// KeyError is a key that is not written as its field's name, or that
// appears twice in one object.
type KeyError struct {
	Key  string // as written
	Want string // the field's exact name, when the key names one in another case
	Dup  bool
}

func (e *KeyError) Error() string { return fmt.Sprintf("field %q %s", clip(e.Key), e.detail()) }

// detail is what is wrong with the key.
func (e *KeyError) detail() string {
	if e.Dup {
		return "appears twice"
	}
	return fmt.Sprintf("must be written %q (names are exact)", e.Want)
}

// CheckKeys reports the first key of data, at any depth, that names a
// field of t in another case, or repeats in its object. Keys that name no
// field are left to the decoder's unknown-field check, and values of types
// that decode themselves are checked for repeats only.
func CheckKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := walk(dec, t)
	if _, ok := err.(*KeyError); ok {
		return err
	}
	return nil // malformed JSON is the decoder's to report
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
)

// walk consumes one value of dec, of type t (nil: unknown).
func walk(dec *json.Decoder, t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		// Raw on purpose: its reader checks it (a frame's input is an
		// operation's, decoded with DecodeInput).
		var skip json.RawMessage
		return dec.Decode(&skip)
	}
	if t != nil && (reflect.PointerTo(t).Implements(unmarshalerType) || t.Kind() == reflect.Interface) {
		t = nil
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		var fields *structFields
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = fieldsOf(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			if seen[key] {
				return &KeyError{Key: key, Dup: true}
			}
			seen[key] = true
			next := elem
			if fields != nil {
				f, exact := fields.exact[key]
				if !exact {
					if f, ok := fields.folded[strings.ToLower(key)]; ok {
						return &KeyError{Key: key, Want: f.name}
					}
				}
				next = f.typ
			}
			if err := walk(dec, next); err != nil {
				return err
			}
		}
		_, err := dec.Token() // '}'
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for dec.More() {
			if err := walk(dec, elem); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
	}
	return nil
}

type fieldInfo struct {
	name string
	typ  reflect.Type
}

// structFields are a struct type's JSON names, exact and in lower case.
type structFields struct {
	exact, folded map[string]fieldInfo
}

// fieldsOf reads t's fields. It is not cached: the types are small, and a
// cache would be state shared by every caller.
func fieldsOf(t reflect.Type) *structFields {
	m := &structFields{exact: map[string]fieldInfo{}, folded: map[string]fieldInfo{}}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := sf.Type
			if sf.Anonymous && name == "" {
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					add(ft) // its fields are promoted
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			f := fieldInfo{name: name, typ: sf.Type}
			if _, ok := m.exact[name]; !ok {
				m.exact[name] = f
			}
			if _, ok := m.folded[strings.ToLower(name)]; !ok {
				m.folded[strings.ToLower(name)] = f
			}
		}
	}
	add(t)
	return m
}

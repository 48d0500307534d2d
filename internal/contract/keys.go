package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
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
// field are left to the decoder's unknown-field check, values of types
// that decode themselves are checked for repeats only, and malformed JSON
// is left to the decoder to report. It runs on every frame, so it scans the
// bytes once and allocates nothing for well-formed input.
func CheckKeys(data []byte, t reflect.Type) error {
	sc := keyScanner{b: data}
	err := sc.value(t)
	if ke, ok := err.(*KeyError); ok {
		return ke
	}
	return nil
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	errMalformed    = errors.New("malformed JSON")
)

// keyScanner walks JSON bytes, checking object keys against the types the
// values decode into.
type keyScanner struct {
	b []byte
	i int
}

func (s *keyScanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// str consumes a string and returns its raw contents (escapes not undone)
// and whether it has any.
func (s *keyScanner) str() ([]byte, bool, error) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, errMalformed
	}
	start, escaped := s.i+1, false
	for s.i++; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '\\':
			escaped = true
			s.i++
		case '"':
			raw := s.b[start:s.i]
			s.i++
			return raw, escaped, nil
		}
	}
	return nil, false, errMalformed
}

// value consumes one value that decodes into t (nil: unknown).
func (s *keyScanner) value(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	opaque := t == rawMessageType // its reader checks it (a frame's input: DecodeInput)
	if t != nil && !opaque && (reflect.PointerTo(t).Implements(unmarshalerType) || t.Kind() == reflect.Interface) {
		t = nil
	}
	s.ws()
	if s.i >= len(s.b) {
		return errMalformed
	}
	switch s.b[s.i] {
	case '{':
		if opaque {
			t = nil
		}
		return s.object(t, opaque)
	case '[':
		s.i++
		var elem reflect.Type
		if t != nil && !opaque && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for first := true; ; first = false {
			s.ws()
			if s.i < len(s.b) && s.b[s.i] == ']' && first {
				s.i++
				return nil
			}
			if err := s.valueOrSkip(elem, opaque); err != nil {
				return err
			}
			if done, err := s.after(']'); done || err != nil {
				return err
			}
		}
	case '"':
		_, _, err := s.str()
		return err
	}
	for s.i < len(s.b) && !strings.ContainsRune(",}] \t\n\r", rune(s.b[s.i])) {
		s.i++
	}
	return nil
}

// valueOrSkip is value, with no key checks inside an opaque value.
func (s *keyScanner) valueOrSkip(t reflect.Type, opaque bool) error {
	if opaque {
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == '{' {
			return s.object(nil, true)
		}
		return s.value(nil)
	}
	return s.value(t)
}

// object consumes an object whose values decode into the fields of t (a
// struct) or its elements (a map); opaque skips every check inside.
func (s *keyScanner) object(t reflect.Type, opaque bool) error {
	s.i++ // '{'
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
	var seenBuf [16][]byte
	seen := seenBuf[:0]
	for first := true; ; first = false {
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == '}' && first {
			s.i++
			return nil
		}
		raw, escaped, err := s.str()
		if err != nil {
			return err
		}
		key := raw
		if escaped || !utf8.Valid(raw) {
			// The key as the decoder reads it: escapes undone, and bytes
			// that are not UTF-8 replaced (U+FFFD), so that keys it reads
			// as one are one here too, and a refusal names what it read.
			var k string
			if json.Unmarshal(s.b[s.i-len(raw)-2:s.i], &k) != nil {
				return errMalformed
			}
			key = []byte(k)
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return errMalformed
		}
		s.i++
		next := elem
		if !opaque {
			for _, k := range seen {
				if bytes.Equal(k, key) {
					return &KeyError{Key: string(key), Dup: true}
				}
			}
			seen = append(seen, key)
			if fields != nil {
				f, exact := fields.exact[string(key)]
				if !exact {
					if f, ok := fields.folded[strings.ToLower(string(key))]; ok {
						return &KeyError{Key: string(key), Want: f.name}
					}
				}
				next = f.typ
			}
		}
		if err := s.valueOrSkip(next, opaque); err != nil {
			return err
		}
		if done, err := s.after('}'); done || err != nil {
			return err
		}
	}
}

// after consumes what follows a member of an array or object: a comma
// (more to come) or the closing byte (done).
func (s *keyScanner) after(closing byte) (done bool, err error) {
	s.ws()
	switch {
	case s.i >= len(s.b):
		return false, errMalformed
	case s.b[s.i] == closing:
		s.i++
		return true, nil
	case s.b[s.i] != ',':
		return false, errMalformed
	}
	s.i++
	return false, nil
}

type fieldInfo struct {
	name string
	typ  reflect.Type
}

// structFields are a struct type's JSON names, exact and in lower case.
type structFields struct {
	exact, folded map[string]fieldInfo
}

// fieldCache memoizes fieldsOf, as encoding/json memoizes its own view of
// a type: what it holds is derived from the type alone and never changes.
var fieldCache sync.Map // reflect.Type -> *structFields

// fieldsOf is t's fields.
func fieldsOf(t reflect.Type) *structFields {
	if m, ok := fieldCache.Load(t); ok {
		return m.(*structFields)
	}
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
	fieldCache.Store(t, m)
	return m
}

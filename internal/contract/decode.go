package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"regexp"
	"strings"
)

// Validator is an input that checks itself.
type Validator interface{ Validate() error }

// DecodeInput reads raw into v strictly (unknown fields and wrong types are
// BAD_REQUEST naming the field) and validates it. Empty raw decodes as {}.
func DecodeInput(raw json.RawMessage, v Validator) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	if err := CheckKeys(raw, reflect.TypeOf(v)); err != nil {
		return keyError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, v)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest("", "input must be one JSON object")
	}
	return v.Validate()
}

// keyError is a KeyError as the field's BAD_REQUEST.
func keyError(err error) *Error {
	ke := err.(*KeyError)
	e := BadRequest(clip(ke.Key), "%s", ke.detail())
	if ke.Want != "" {
		e = e.With("didYouMean", ke.Want)
	}
	return e
}

func decodeError(err error, v any) *Error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return BadRequest("", "input must be a JSON object, got %s", typeErr.Value)
		}
		return BadRequest(field, "must be %s, got %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return BadRequest("", "input is not valid JSON: %v", syntaxErr)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		if meant := didYouMean(name, v); meant != "" {
			return BadRequest(clip(name), "unknown field; did you mean %s?", meant).With("didYouMean", meant)
		}
		return BadRequest(clip(name), "unknown field")
	}
	return BadRequest("", "%s", strings.TrimPrefix(msg, "json: "))
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "int32", "uint", "uint64":
		return "an integer"
	case "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "string":
		return "a string"
	case "struct", "map":
		return "an object"
	case "slice":
		return "an array"
	}
	return goKind
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/+=-]*$`)

// CheckKey checks an optional client-chosen key (an idempotency key) given
// in field: the rule of every id.
func CheckKey(field, v string) error { return checkID(field, v, false) }

func checkID(field, v string, required bool) error {
	if v == "" {
		if required {
			return BadRequest(field, "is required")
		}
		return nil
	}
	if len(v) > MaxIDLen {
		return BadRequest(field, "must be at most %d characters, got %d", MaxIDLen, len(v))
	}
	if !idPattern.MatchString(v) {
		return BadRequest(field, "must start with a letter or digit and use only letters, digits and ._:@/+=-, got %q", clip(v))
	}
	return nil
}

func checkLen(field, v string, max int) error {
	if len(v) > max {
		return BadRequest(field, "must be at most %d characters, got %d", max, len(v))
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return BadRequest(field, "must not contain control characters")
		}
	}
	return nil
}

// clip shortens a value quoted back in a message (Clip).
func clip(s string) string { return Clip(s) }

// ParseEnumError formats a list of allowed values.
func ParseEnumError(field, got string, allowed ...string) *Error {
	return BadRequest(field, "must be one of %s, got %q", strings.Join(allowed, ", "), clip(got))
}

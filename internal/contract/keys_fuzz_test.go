package contract

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzCheckKeys feeds the key check anything: it never panics, and on
// well-formed JSON it refuses exactly what it says (the key it names is in
// the input).
func FuzzCheckKeys(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","op":"lease.renew","input":{"leaseId":"lse_1","ttlMs":5}}`,
		`{"ID":1}`, `{"id":1,"id":2}`, `{"input":{"a":[1,{"b":2}]}}`, `[`, `{"a`, `{"\u0069d":1}`, `{"id":"\\"}`,
	} {
		f.Add([]byte(seed))
	}
	req := reflect.TypeFor[Request]()
	in := reflect.TypeFor[*LeaseRequestInput]()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range []reflect.Type{req, in} {
			err := CheckKeys(data, typ)
			if err == nil || !json.Valid(data) {
				continue
			}
			ke := err.(*KeyError)
			var generic any
			if json.Unmarshal(data, &generic) != nil {
				t.Fatalf("valid JSON that does not decode: %q", data)
			}
			if !containsKey(generic, ke.Key) {
				t.Fatalf("%q: refused key %q, which it does not hold", data, ke.Key)
			}
		}
	})
}

func containsKey(v any, key string) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == key || containsKey(e, key) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if containsKey(e, key) {
				return true
			}
		}
	}
	return false
}

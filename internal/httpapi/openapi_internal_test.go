package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// undocumented lists the mux patterns of s that doc has no operation for,
// and the operations of doc that s does not serve.
func undocumented(t *testing.T, s *Server, doc []byte) (missing, extra []string) {
	t.Helper()
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	described := map[string]bool{}
	for path, item := range d.Paths {
		for method := range item {
			described[strings.ToUpper(method)+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, p := range s.mux.patterns {
		served[p] = true
		if !described[p] {
			missing = append(missing, p)
		}
	}
	for p := range described {
		if !served[p] {
			extra = append(extra, p)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return missing, extra
}

func TestEveryServedRouteIsInTheDescriptionAndNoOther(t *testing.T) {
	s := New(Options{})
	doc, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	missing, extra := undocumented(t, s, doc)
	if len(missing) > 0 {
		t.Errorf("routes served but not in the description: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("operations described but not served: %v", extra)
	}
	if len(s.mux.patterns) < 30 {
		t.Fatalf("only %d routes recorded: %v", len(s.mux.patterns), s.mux.patterns)
	}

	// A route registered beside the table is found out.
	s.mux.HandleFunc("GET /v1/secret", func(http.ResponseWriter, *http.Request) {})
	if missing, _ := undocumented(t, s, doc); !slices.Equal(missing, []string{"GET /v1/secret"}) {
		t.Fatalf("a route registered outside the table: missing %v, want [GET /v1/secret]", missing)
	}
}

package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/simlock/simlock/internal/httpapi"
	"github.com/simlock/simlock/internal/termtest"
)

// docPath is the checked-in description.
var docPath = filepath.Join("..", "..", "docs", "openapi.json")

func TestTheCheckedInDescriptionIsTheGeneratedOne(t *testing.T) {
	got, err := httpapi.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(termtest.UpdateEnv) == "1" {
		if err := os.WriteFile(docPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("%v (run with %s=1 to write it)", err, termtest.UpdateEnv)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/openapi.json is not the generated description; run the httpapi tests with %s=1 to rewrite it", termtest.UpdateEnv)
	}
	again, _ := httpapi.OpenAPI()
	if !bytes.Equal(got, again) {
		t.Fatal("two builds of the description differ")
	}
}

func TestTheDescriptionIsValidOpenAPI31(t *testing.T) {
	raw, err := httpapi.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Fatalf("openapi version %q", v)
	}
	if _, err := doc.BuildV3Model(); err != nil {
		t.Fatalf("the description does not build as an OpenAPI 3 model: %v", err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("%s: %s (%s)", e.Message, e.Reason, e.HowToFix)
		}
	}
}

func TestTheDescriptionIsServedWithoutAToken(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	resp := h.do("GET", "/v1/openapi.json", "", "")
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	want, _ := httpapi.OpenAPI()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, want) {
		t.Fatalf("GET /v1/openapi.json: %d %s, %d bytes (want the description's %d)", resp.StatusCode, resp.Header.Get("Content-Type"), len(body), len(want))
	}
	if n := h.fake.callCount(); n != 0 {
		t.Fatalf("serving the description called the backend %d times", n)
	}
}

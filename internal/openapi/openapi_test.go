package openapi

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

type color string

type inner struct {
	Deep string `json:"deep"`
}

type sample struct {
	inner
	Name     string            `json:"name"`
	Nick     string            `json:"nick,omitempty"`
	Ptr      *inner            `json:"ptr"`
	OptPtr   *inner            `json:"optPtr,omitempty"`
	List     []int             `json:"list"`
	OptList  []string          `json:"optList,omitempty"`
	Tags     map[string]string `json:"tags,omitzero"`
	Raw      json.RawMessage   `json:"raw"`
	At       time.Time         `json:"at"`
	Color    color             `json:"color"`
	Count    int64             `json:"count,string"`
	Skipped  string            `json:"-"`
	hidden   string
	Untagged bool
}

func TestSchemasFollowEncodingJSON(t *testing.T) {
	spec := Spec{
		Operations: []Operation{{Method: "GET", Path: "/x", ID: "x",
			Responses: []Response{{Status: 200, Bodies: []Body{{Type: reflect.TypeFor[sample]()}}}}}},
		Enums: map[reflect.Type][]string{reflect.TypeFor[color](): {"red", "blue", "red"}},
	}
	raw, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Components.Schemas["Sample"]
	props := s["properties"].(map[string]any)
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	for _, tc := range []struct{ field, want string }{
		{"deep", `{"type":"string"}`}, // promoted from the embedded struct
		{"name", `{"type":"string"}`},
		{"ptr", `{"anyOf":[{"$ref":"#/components/schemas/Inner"},{"type":"null"}]}`}, // may be null
		{"optPtr", `{"$ref":"#/components/schemas/Inner"}`},                          // left out when nil, never null
		{"list", `{"items":{"format":"int64","type":"integer"},"type":["array","null"]}`},
		{"optList", `{"items":{"type":"string"},"type":"array"}`},
		{"tags", `{"additionalProperties":{"type":"string"},"type":"object"}`},
		{"raw", `{}`},
		{"at", `{"format":"date-time","type":"string"}`},
		{"color", `{"$ref":"#/components/schemas/Color"}`},
		{"count", `{"type":"string"}`},
		{"Untagged", `{"type":"boolean"}`},
	} {
		if got := js(props[tc.field]); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.field, got, tc.want)
		}
	}
	for _, gone := range []string{"Skipped", "-", "hidden", "inner"} {
		if _, ok := props[gone]; ok {
			t.Errorf("%s is in the schema", gone)
		}
	}
	if got, want := js(s["required"]), `["Untagged","at","color","count","deep","list","name","ptr","raw"]`; got != want {
		t.Errorf("required %s, want %s", got, want)
	}
	if got, want := js(doc.Components.Schemas["Color"]), `{"enum":["blue","red"],"type":"string"}`; got != want {
		t.Errorf("Color %s, want %s", got, want)
	}
	again, _ := Build(spec)
	if string(again) != string(raw) {
		t.Fatal("two builds differ")
	}
}

package daemon

import (
	"slices"
	"testing"

	"github.com/simlock/simlock/internal/config"
)

func TestAWorkerDialsGatewayURLsElseGatewayURL(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want []string
	}{
		{`{}`, nil},
		{`{"gateway":{"url":"https://gw.example:7430"}}`, []string{"https://gw.example:7430"}},
		{`{"gateway":{"url":"https://gw.example:7430","urls":["https://gw-1.example:7430","https://gw-2.example:7430"]}}`,
			[]string{"https://gw-1.example:7430", "https://gw-2.example:7430"}},
		{`{"gateway":{"urls":["https://gw-1.example:7430"]}}`, []string{"https://gw-1.example:7430"}},
	} {
		cfg, err := config.Parse([]byte(tc.doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := gatewayTargets(cfg); !slices.Equal(got, tc.want) {
			t.Errorf("%s: targets %v, want %v", tc.doc, got, tc.want)
		}
	}
}

// A connected worker reconnects when a live key changes, a list among
// them: gateway.urls is compared as a list.
func TestAChangeOfTheGatewayURLsListIsALiveChange(t *testing.T) {
	parse := func(doc string) *config.Config {
		cfg, err := config.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	was := parse(`{"gateway":{"urls":["https://gw-1.example:7430","https://gw-2.example:7430"]}}`)
	now := parse(`{"gateway":{"urls":["https://gw-1.example:7430","https://gw-3.example:7430"]}}`)
	if !config.Live("gateway.urls") {
		t.Fatal("gateway.urls is not a live key")
	}
	if sameSetting(now, was, "gateway.urls") {
		t.Error("gateway.urls changed from gw-2 to gw-3 and the worker saw no change")
	}
	if !sameSetting(was, parse(`{"gateway":{"urls":["https://gw-1.example:7430","https://gw-2.example:7430"]}}`), "gateway.urls") {
		t.Error("the same gateway.urls read twice is a change")
	}
}

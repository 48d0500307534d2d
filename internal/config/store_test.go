package config

import (
	"strings"
	"testing"
)

func TestCheckStore(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"sqlite", true},
		{"postgres://simlock:pw@db.example:5432/simlock", true},
		{"postgresql://db.example/simlock?sslmode=require", true},
		{"postgres:///simlock", false},
		{"mysql://db.example/simlock", false},
		{"SQLite", false},
		{"host=db password=pw", false},
	} {
		if err := checkStore(tc.in); (err == nil) != tc.ok {
			t.Errorf("checkStore(%s) = %v, want ok %v", RedactStoreURL(tc.in), err, tc.ok)
		}
	}
}

// gateway.store's password is never shown: not by config set's answer, not
// by get or show, not in the error of a value refused.
func TestGatewayStoreIsShownRedacted(t *testing.T) {
	const secret = "hunter2-secret"
	home := t.TempDir()
	for _, u := range []string{
		"postgres://simlock:" + secret + "@db.example:5432/simlock",
		"postgres://simlock@db.example/simlock?sslmode=disable&password=" + secret,
	} {
		v, err := Set(home, "gateway.store", u)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(v.(string), secret) || !strings.Contains(v.(string), "db.example") {
			t.Errorf("Set's answer = %v, want the URL with its password redacted", v)
		}
		cfg, err := Load(home)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.String("gateway.store") != u {
			t.Errorf("the daemon reads gateway.store as %q, want the URL as set", RedactStoreURL(cfg.String("gateway.store")))
		}
		if got, _ := cfg.Get("gateway.store"); strings.Contains(got.(string), secret) {
			t.Errorf("Get prints the password: %v", got)
		}
		gw := cfg.Nested()["gateway"].(map[string]any)
		if strings.Contains(gw["store"].(string), secret) {
			t.Errorf("Nested prints the password: %v", gw["store"])
		}
	}
	_, err := Set(home, "gateway.store", "postgres://simlock:"+secret+"@/nohost")
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Set of a URL with no host = %v; want an error that does not print the password", err)
	}
}

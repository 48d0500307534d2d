package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// config keys shows defaults as JSON, the form config set takes, not Go's
// map[...] and [...] syntax.
func TestConfigKeysPrintsDefaultsAsJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	home := t.TempDir()
	env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string {
		if k == "SIMLOCK_HOME" {
			return home
		}
		return ""
	}}
	if code := Run(context.Background(), []string{"config", "keys"}, env); code != 0 {
		t.Fatalf("config keys exited %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		`drivers.demo.downloadableRuntimes (default {"android":["37"],"ios":["26.4"]}):`,
		`capacity.strategy (default "resource"):`,
		`warmPool.targets (default []):`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config keys lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "map[") {
		t.Errorf("config keys prints Go map syntax:\n%s", out.String())
	}
}

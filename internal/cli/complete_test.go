package cli

import (
	"bytes"
	"strings"
	"testing"
)

// complete runs the shell's completion request and returns the candidates
// (the lines before cobra's :directive line).
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	var out, errOut bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string {
		if k == "SIMLOCK_HOME" {
			return t.TempDir() // no daemon: nothing is started for a completion
		}
		return ""
	}}
	if code := Run(t.Context(), append([]string{"__complete"}, args...), env); code != 0 {
		t.Fatalf("__complete %v exited %d: %s", args, code, errOut.String())
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(l, ":") {
			got = append(got, strings.SplitN(l, "\t", 2)[0])
		}
	}
	return got
}

func TestCompletionOffersPlatformsClassesAndConfigKeys(t *testing.T) {
	if got := complete(t, "lease", "--platform", ""); strings.Join(got, " ") != "ios android" {
		t.Errorf("lease --platform completes %q, want ios android", got)
	}
	if got := complete(t, "lease", "--class", "t"); !strings.Contains(strings.Join(got, " "), "tablet") {
		t.Errorf("lease --class completes %q, want the classes", got)
	}
	got := complete(t, "config", "set", "lease.")
	if !strings.Contains(strings.Join(got, " "), "lease.maxTtlMs") {
		t.Errorf("config set completes %q, want lease.maxTtlMs among them", got)
	}
	// No daemon runs: models and lease ids complete to nothing, at once.
	if got := complete(t, "release", ""); len(got) != 0 {
		t.Errorf("release completes %q with no daemon, want nothing", got)
	}
}

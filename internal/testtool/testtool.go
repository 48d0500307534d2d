// Package testtool finds the programs that tests drive but that are not
// Go (a browser, Prometheus, systemd-analyze, the claude CLI). Without the
// program a test is skipped, saying how to install it, except under
// CI=true, where it fails: CI installs each of them (.ci/run), so a missing
// one there is a broken machine, not a choice.
package testtool

import (
	"os"
	"os/exec"
	"testing"
)

// Find returns the path of the first of names on the PATH. Without any,
// it skips t, or fails it under CI=true, with why and install (how to get
// one).
func Find(t testing.TB, install string, names ...string) string {
	t.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no " + names[0] + " on the PATH: " + install
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

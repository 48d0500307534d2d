// Package testtool finds the programs that tests drive but that are not
// Go (a browser, Prometheus, systemd-analyze, the claude CLI, PostgreSQL). Without the
// program a test is skipped, saying how to install it, except under
// CI=true, where it fails: CI installs each of them (.ci/run), so a missing
// one there is a broken machine, not a choice.
package testtool

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

// FindGlob returns the last, in lexical order, of the files matching
// pattern (a filepath.Match pattern, for a program kept off the PATH under
// a versioned directory, such as Debian's PostgreSQL binaries). Without a
// match it skips t, or fails it under CI=true, with install.
func FindGlob(t testing.TB, install, pattern string) string {
	t.Helper()
	if ms, _ := filepath.Glob(pattern); len(ms) > 0 {
		sort.Strings(ms)
		return ms[len(ms)-1]
	}
	msg := "nothing matches " + pattern + ": " + install
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

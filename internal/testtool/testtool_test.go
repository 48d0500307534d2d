package testtool

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how Find ended a test instead of
// ending this one.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Skip(args ...any)  { r.skipped = args[0].(string); runtime.Goexit() }
func (r *recorder) Fatal(args ...any) { r.failed = args[0].(string); runtime.Goexit() }

func find(t *testing.T, names ...string) (path string, r *recorder) {
	r = &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		path = Find(r, "install it", names...)
	}()
	<-done
	return path, r
}

func TestFindReturnsTheFirstProgramOnThePath(t *testing.T) {
	t.Setenv("CI", "")
	p, r := find(t, "no-such-program-here", "sh")
	if !strings.HasSuffix(p, "/sh") || r.skipped != "" || r.failed != "" {
		t.Fatalf("Find = %q (skipped %q, failed %q), want the path of sh", p, r.skipped, r.failed)
	}
}

func TestWithoutTheProgramATestIsSkippedButFailsUnderCI(t *testing.T) {
	t.Setenv("CI", "")
	if _, r := find(t, "no-such-program-here"); r.skipped == "" || r.failed != "" || !strings.Contains(r.skipped, "install it") {
		t.Errorf("outside CI: skipped %q, failed %q; want a skip saying how to install it", r.skipped, r.failed)
	}
	t.Setenv("CI", "true")
	if _, r := find(t, "no-such-program-here"); r.failed == "" || r.skipped != "" {
		t.Errorf("under CI=true: skipped %q, failed %q; want a failure", r.skipped, r.failed)
	}
}

func TestFindGlobReturnsTheLastMatchOrSkipsButFailsUnderCI(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"14", "15"} {
		if err := os.MkdirAll(filepath.Join(dir, v, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, v, "bin", "initdb"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	glob := func(pattern string) (path string, r *recorder) {
		r = &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			path = FindGlob(r, "install it", pattern)
		}()
		<-done
		return path, r
	}
	t.Setenv("CI", "")
	if p, r := glob(filepath.Join(dir, "*", "bin", "initdb")); p != filepath.Join(dir, "15", "bin", "initdb") || r.skipped != "" || r.failed != "" {
		t.Errorf("FindGlob = %q (skipped %q, failed %q), want the 15 one", p, r.skipped, r.failed)
	}
	if _, r := glob(filepath.Join(dir, "*", "bin", "nothing")); r.skipped == "" || r.failed != "" || !strings.Contains(r.skipped, "install it") {
		t.Errorf("outside CI without a match: skipped %q, failed %q; want a skip saying how to install it", r.skipped, r.failed)
	}
	t.Setenv("CI", "true")
	if _, r := glob(filepath.Join(dir, "*", "bin", "nothing")); r.failed == "" || r.skipped != "" {
		t.Errorf("under CI=true without a match: skipped %q, failed %q; want a failure", r.skipped, r.failed)
	}
}

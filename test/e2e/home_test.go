package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The real binary keeps SIMLOCK_HOME private: a loose home is tightened to
// 0700 by the daemon a command starts, and a daemon log that is a link to
// a file elsewhere stops `daemon run` with a clear error, the file it
// points to untouched.
func TestTheHomeIsTightenedAndALinkedLogIsRefused(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	if err := os.Chmod(h.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h.startDaemon()
	if fi, err := os.Stat(h.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("a 0755 home after the daemon started: %v, %v; want 0700", fi.Mode().Perm(), err)
	}

	h2 := newHome(t, fastDemo...)
	theirs := h2.Dir + ".theirs"
	if err := os.WriteFile(theirs, []byte("theirs\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(theirs) })
	if err := os.Symlink(theirs, h2.path("daemon.log")); err != nil {
		t.Fatal(err)
	}
	// A daemon that followed the link would run on: it is stopped by the
	// home's cleanup, and the wait below names what it did.
	r := waitResult(t, h2.runAsync("daemon", "run"), 20*time.Second, "daemon run with daemon.log a link to a file elsewhere was still running: it did not refuse the link")
	if r.code == 0 || !strings.Contains(r.stderr, "symbolic link") {
		t.Errorf("daemon run with daemon.log a link: exit %d, want a failure saying it is a symbolic link\n%s", r.code, r)
	}
	if b, _ := os.ReadFile(theirs); string(b) != "theirs\n" {
		t.Errorf("the file daemon.log links to now holds %q", b)
	}
}

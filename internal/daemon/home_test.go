package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/homedir"
)

// A home that exists with a loose mode is tightened to 0700 when the
// daemon starts.
func TestTheDaemonTightensALooseHome(t *testing.T) {
	home := tempHome(t)
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := Start(t.Context(), Options{Home: home, Version: "test", Config: config.Default(), Drivers: demoDrivers(t), Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop("test over") })
	if fi, err := os.Stat(home); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("home after the daemon started: %v, %v; want 0700", fi.Mode().Perm(), err)
	}
}

// elsewhere is a file outside the home that a link in it points to; its
// content must be what it was when the test ends.
func elsewhere(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "theirs")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(p); err != nil || string(b) != content {
			t.Errorf("the file a link in the home points to now holds %q (%v), want it untouched", b, err)
		}
	})
	return p
}

// A state file in the home that is a symbolic link is refused, never
// followed: the lock stops the start, the database stops the startup
// with the reason, and the admin token is replaced, not written through.
func TestLinkedStateFilesAreRefusedNotFollowed(t *testing.T) {
	opts := func(home string) Options {
		return Options{Home: home, Version: "test", Config: config.Default(), Drivers: demoDrivers(t), Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}}
	}

	home := tempHome(t)
	if err := os.Symlink(elsewhere(t, "not a lock"), filepath.Join(home, LockName)); err != nil {
		t.Fatal(err)
	}
	if d, err := Start(t.Context(), opts(home)); !errors.Is(err, homedir.ErrSymlink) {
		if d != nil {
			d.Stop("test over")
		}
		t.Errorf("start with daemon.lock a link: %v, want a refusal (ErrSymlink)", err)
	}

	for _, name := range []string{DBName, DBName + "-wal"} {
		home := tempHome(t)
		if err := os.Symlink(elsewhere(t, "not a database"), filepath.Join(home, name)); err != nil {
			t.Fatal(err)
		}
		d, err := Start(t.Context(), opts(home))
		if err != nil {
			t.Fatal(err)
		}
		_, err = dial(t, home, "a", false).StatusWith(context.Background(), contract.StatusGetInput{WaitReady: true})
		d.Stop("test over")
		if code(err) != contract.CodeDaemonStartupFailed || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("startup with %s a link: %v, want DAEMON_STARTUP_FAILED saying it is a link", name, err)
		}
	}

	home = tempHome(t)
	token := filepath.Join(home, AdminTokenName)
	if err := os.Symlink(elsewhere(t, "not a token"), token); err != nil {
		t.Fatal(err)
	}
	d, err := Start(t.Context(), opts(home))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop("test over")
	if fi, err := os.Lstat(token); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("admin.token after the start: %v, %v; want a file of its own, mode 0600", fi.Mode(), err)
	}
}

package homedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name    string
		info    Info
		tighten bool
		refuse  string
	}{
		{"private", Info{IsDir: true, UID: 501, Perm: 0o700}, false, ""},
		{"readable by all", Info{IsDir: true, UID: 501, Perm: 0o755}, true, ""},
		{"group may enter", Info{IsDir: true, UID: 501, Perm: 0o710}, true, ""},
		{"others may write", Info{IsDir: true, UID: 501, Perm: 0o703}, true, ""},
		{"another user's", Info{IsDir: true, UID: 502, Perm: 0o700}, false, "belongs to uid 502"},
		{"root's, for a user", Info{IsDir: true, UID: 0, Perm: 0o755}, false, "belongs to uid 0"},
		{"a file", Info{IsDir: false, UID: 501, Perm: 0o600}, false, "not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tighten, err := Check("/h", c.info, 501)
			switch {
			case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse)):
				t.Fatalf("err %v, want one saying %q", err, c.refuse)
			case c.refuse == "" && err != nil:
				t.Fatalf("err %v, want none", err)
			case tighten != c.tighten:
				t.Fatalf("tighten %v, want %v", tighten, c.tighten)
			}
		})
	}
}

// A home that exists with a loose mode is tightened to 0700; a missing one
// is made 0700.
func TestPrepareTightensALooseHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(home, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if err := Prepare(home); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(home); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("home after Prepare: %v, %v; want mode 0700", fi.Mode().Perm(), err)
	}
	fresh := filepath.Join(t.TempDir(), "a", "b")
	if err := Prepare(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("a new home: %v, %v; want mode 0700", fi.Mode().Perm(), err)
	}
}

// A home another user owns is refused and left as it is. Only root can
// give a directory away, so elsewhere Check's table covers it.
func TestPrepareRefusesAnotherUsersHome(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("making a directory another user's needs root; TestCheck covers the rule")
	}
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := Prepare(home); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("Prepare of another user's home: %v, want a refusal naming its owner", err)
	}
	if fi, _ := os.Stat(home); fi.Mode().Perm() != 0o755 {
		t.Fatalf("a refused home was changed to %v", fi.Mode().Perm())
	}
}

// A file that is a symbolic link is refused, for reading and for writing,
// and what it points to is neither read nor written.
func TestLinksAreRefusedNotFollowed(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "daemon.log")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(link, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenFile of a link for writing: %v, want ErrSymlink", err)
	}
	if b, err := ReadFile(link); !errors.Is(err, ErrSymlink) {
		t.Errorf("ReadFile of a link: %q, %v; want ErrSymlink", b, err)
	}
	if err := RefuseLinks(filepath.Join(dir, "missing"), target, link); !errors.Is(err, ErrSymlink) {
		t.Errorf("RefuseLinks: %v, want ErrSymlink", err)
	}
	if err := RefuseLinks(filepath.Join(dir, "missing"), target); err != nil {
		t.Errorf("RefuseLinks without a link: %v", err)
	}
	dangling := filepath.Join(dir, "admin.token")
	if err := os.Symlink(filepath.Join(dir, "not-yet"), dangling); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(dangling, os.O_CREATE|os.O_WRONLY, 0o600); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenFile creating through a dangling link: %v, want ErrSymlink", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "not-yet")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("creating through a dangling link made its target: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "theirs" {
		t.Errorf("the link's target now holds %q", b)
	}
}

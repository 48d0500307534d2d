package logfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/homedir"
)

func TestALogWrittenPastItsBoundRotatesAndKeepsAFewFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "daemon.log")
	const bound = 1000
	l, err := Open(path, bound)
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for i := range 200 { // about 8 KB: eight files' worth
		last = fmt.Sprintf("{\"msg\":\"line %03d\",\"pad\":\"%s\"}\n", i, strings.Repeat("x", 10))
		if _, err := l.Write([]byte(last)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"daemon.log", "daemon.log.1", "daemon.log.2", "daemon.log.3"}; strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("files %v, want %v: the live one and %d rotated", names, want, Kept)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > bound {
			t.Errorf("%s holds %d bytes, past the bound %d", n, len(b), bound)
		}
		if len(b) == 0 || b[len(b)-1] != '\n' || bytes.Count(b, []byte("{")) != bytes.Count(b, []byte("\n")) {
			t.Errorf("%s does not hold whole lines: %q", n, b)
		}
	}
	live, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(live), last) {
		t.Errorf("the live file does not end with the last line written")
	}
	older, _ := os.ReadFile(path + ".1")
	if !bytes.Contains(older, []byte("line")) || bytes.Compare(older, live) == 0 {
		t.Errorf("daemon.log.1 does not hold the lines before the live file's")
	}
}

func TestReopeningALogAppendsAndCountsWhatIsThere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "daemon.log")
	if err := os.WriteFile(path, bytes.Repeat([]byte("a"), 900), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Write(bytes.Repeat([]byte("b"), 200)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path + ".1"); len(b) != 900 {
		t.Errorf("the 900 bytes a previous run left were not rotated out before a write past the bound: %d in .1", len(b))
	}
	if b, _ := os.ReadFile(path); len(b) != 200 {
		t.Errorf("the live file holds %d bytes, want the 200 written", len(b))
	}
}

func TestALogThatCannotRotateKeepsEveryLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "daemon.log")
	// path.2 cannot move to path.3: both are directories with something in.
	for _, d := range []string{path + ".2", path + ".3"} {
		if err := os.MkdirAll(filepath.Join(d, "x"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Open(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("y", 39) + "\n")
	for range 10 {
		if _, err := l.Write(line); err != nil {
			t.Fatalf("a write after a failed rotation: %v", err)
		}
	}
	l.Close()
	if b, _ := os.ReadFile(path); len(b) != 10*len(line) {
		t.Errorf("the live file holds %d bytes, want all %d written: a failed rotation lost lines", len(b), 10*len(line))
	}
}

// A log file that is a symbolic link is refused: the daemon's log lines
// never go to the file it points to.
func TestALogThatIsALinkIsRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "theirs")
	if err := os.WriteFile(target, []byte("theirs\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "daemon.log")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(path, 0); !errors.Is(err, homedir.ErrSymlink) {
		if l != nil {
			l.Write([]byte("a line\n"))
			l.Close()
		}
		t.Errorf("Open of a link: %v, want ErrSymlink", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "theirs\n" {
		t.Errorf("the link's target now holds %q", b)
	}
}

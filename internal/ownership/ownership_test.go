package ownership

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func reason(err error) string {
	var re *RootError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}

func TestInstanceIsMadeOnceAndKept(t *testing.T) {
	home := t.TempDir()
	a, err := LoadInstance(home)
	if err != nil || a.ID == "" {
		t.Fatal(a, err)
	}
	b, err := LoadInstance(home)
	if err != nil || b.ID != a.ID {
		t.Fatalf("second load = %+v, %v; want %s", b, err, a.ID)
	}
}

func TestClaimCreatesAndMarksAnEmptyRoot(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	root := filepath.Join(home, "devices", "ios")
	if err := Claim(root, "ios", in); err != nil {
		t.Fatal(err)
	}
	if err := Check(root, "ios", in); err != nil {
		t.Fatalf("check after claim: %v", err)
	}
	fi, _ := os.Stat(root)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("root mode %o", fi.Mode().Perm())
	}
	if err := Claim(root, "ios", in); err != nil {
		t.Errorf("claiming again: %v", err)
	}
}

func TestRootsThatAreRefused(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	other := Instance{ID: "ins_other"}

	nonEmpty := filepath.Join(home, "nonempty")
	os.MkdirAll(filepath.Join(nonEmpty, "ABCD-1234"), 0o700)
	if r := reason(Claim(nonEmpty, "ios", in)); r != ReasonNonEmptyUnownedRoot {
		t.Errorf("non-empty unmarked root: %q", r)
	}
	if _, err := os.Stat(filepath.Join(nonEmpty, MarkerName)); err == nil {
		t.Error("a marker was written into a non-empty root")
	}

	if r := reason(Claim("relative/root", "ios", in)); r != ReasonNotAbsolute {
		t.Errorf("relative root: %q", r)
	}

	theirs := filepath.Join(home, "theirs")
	Claim(theirs, "ios", other)
	if r := reason(Claim(theirs, "ios", in)); r != ReasonWrongInstance {
		t.Errorf("another instance's root: %q", r)
	}

	bad := filepath.Join(home, "bad")
	os.MkdirAll(bad, 0o700)
	os.WriteFile(filepath.Join(bad, MarkerName), []byte("{not json"), 0o600)
	if r := reason(Claim(bad, "ios", in)); r != ReasonInvalidMarker {
		t.Errorf("broken marker: %q", r)
	}

	link := filepath.Join(home, "link")
	mine := filepath.Join(home, "mine")
	Claim(mine, "ios", in)
	os.Symlink(mine, link)
	if r := reason(Claim(link, "ios", in)); r != ReasonSymlink {
		t.Errorf("symlinked root: %q", r)
	}

	open := filepath.Join(home, "open")
	os.MkdirAll(open, 0o700)
	os.Chmod(open, 0o777)
	if r := reason(Claim(open, "ios", in)); r != ReasonWrongPermissions {
		t.Errorf("world-writable root: %q", r)
	}

	gone := filepath.Join(home, "gone")
	Claim(gone, "android", in)
	os.Remove(filepath.Join(gone, MarkerName))
	if r := reason(Check(gone, "android", in)); r != ReasonMissingMarker {
		t.Errorf("marker removed after the claim: %q", r)
	}
	if r := reason(Check(mine, "android", in)); r != ReasonWrongInstance {
		t.Errorf("another platform's root: %q", r)
	}
}

func TestInside(t *testing.T) {
	cases := map[string]bool{
		"/r/devices/ios":           true,
		"/r/devices/ios/ABC":       true,
		"/r/devices/ios/../ios/x":  true,
		"/r/devices/ios2/x":        false,
		"/r/devices":               false,
		"/r/devices/ios/../../etc": false,
	}
	for p, want := range cases {
		if got := Inside("/r/devices/ios", p); got != want {
			t.Errorf("Inside(%q) = %v, want %v", p, got, want)
		}
	}
}

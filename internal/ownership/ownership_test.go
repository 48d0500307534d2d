package ownership

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func reason(err error) Reason {
	var re *RootError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}

// wantRefused fails unless err is a *RootError for reason.
func wantRefused(t *testing.T, what string, err error, want Reason) {
	t.Helper()
	if got := reason(err); got != want {
		t.Errorf("%s: reason %q (%v), want %q", what, got, err, want)
	}
}

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func chmod(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// claimed is a fresh root that Claim made for in.
func claimed(t *testing.T, root, platform string, in Instance) string {
	t.Helper()
	if err := Claim(root, platform, in); err != nil {
		t.Fatalf("claim %s: %v", root, err)
	}
	return root
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

func TestClaimCreatesARootWithItsMarker(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	root := filepath.Join(home, "devices", "ios")
	claimed(t, root, "ios", in)
	if err := Check(root, "ios", in); err != nil {
		t.Fatalf("check after claim: %v", err)
	}
	for _, dir := range []string{root, filepath.Dir(root)} {
		if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
			t.Errorf("%s has mode %#o, want 0700", dir, fi.Mode().Perm())
		}
	}
	if got := entries(t, filepath.Dir(root)); !slices.Equal(got, []string{"ios"}) {
		t.Errorf("beside the root: %q, want only the root (no staging left behind)", got)
	}
	if got := entries(t, root); !slices.Equal(got, []string{MarkerName}) {
		t.Errorf("in the root: %q, want only the marker", got)
	}
	if err := Claim(root, "ios", in); err != nil {
		t.Errorf("claiming again: %v", err)
	}
}

// A watcher that looks while roots are being claimed never sees one
// without its marker: the root appears only by the rename of a staging
// directory that already holds it.
func TestClaimNeverShowsARootWithoutItsMarker(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	for i := range 20 {
		root := filepath.Join(home, "r", strings.Repeat("x", i+1))
		done := make(chan struct{})
		seen := make(chan bool, 1)
		go func() {
			partial := false
			for {
				select {
				case <-done:
					seen <- partial
					return
				default:
				}
				if _, err := os.Lstat(root); err == nil {
					if _, err := os.Lstat(filepath.Join(root, MarkerName)); err != nil {
						partial = true
					}
				}
			}
		}()
		err := Claim(root, "ios", in)
		close(done)
		if <-seen {
			t.Fatalf("claim %d: the root was visible without its marker", i)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestConcurrentClaimsOfAFreshRootAgree(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	root := filepath.Join(home, "devices", "android")
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = Claim(root, "android", in) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("claim %d: %v", i, err)
		}
	}
	if got := entries(t, filepath.Dir(root)); !slices.Equal(got, []string{"android"}) {
		t.Errorf("beside the root: %q, want only the root", got)
	}
}

// create that finds the root already there when it renames (it lost a
// race) leaves what is there alone, whatever it is, and cleans up after
// itself.
func TestLosingTheCreateRaceKeepsWhatIsThere(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	uid := os.Geteuid()

	theirs := claimed(t, filepath.Join(home, "theirs", "ios"), "ios", Instance{ID: "ins_other"})
	before, _ := os.ReadFile(filepath.Join(theirs, MarkerName))
	if r := create(theirs, "ios", in, uid); r != nil {
		t.Errorf("create over another instance's root: %+v, want nil (the check judges it)", r)
	}
	if after, _ := os.ReadFile(filepath.Join(theirs, MarkerName)); string(after) != string(before) {
		t.Errorf("the marker there was replaced: %s, was %s", after, before)
	}
	wantRefused(t, "another instance's root, after the race", check(theirs, "ios", in, uid), ReasonWrongInstance)

	empty := filepath.Join(home, "empty", "ios")
	if err := os.MkdirAll(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	if r := create(empty, "ios", in, uid); r != nil {
		t.Errorf("create over an empty directory: %+v, want nil", r)
	}
	if got := entries(t, empty); len(got) != 0 {
		t.Errorf("the empty directory there was replaced or written to: it holds %q", got)
	}
	wantRefused(t, "an empty directory, after the race", check(empty, "ios", in, uid), ReasonMissingMarker)

	for _, parent := range []string{filepath.Dir(theirs), filepath.Dir(empty)} {
		if got := entries(t, parent); !slices.Equal(got, []string{"ios"}) {
			t.Errorf("beside %s/ios: %q, want no staging left behind", parent, got)
		}
	}
}

func TestAnExistingEmptyDirectoryIsNotAdopted(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	root := filepath.Join(home, "devices", "ios")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Unix(1_000_000_000, 0)
	os.Chtimes(root, old, old)
	wantRefused(t, "an empty directory simlock did not create", Claim(root, "ios", in), ReasonMissingMarker)
	if got := entries(t, root); len(got) != 0 {
		t.Errorf("the refused directory was written to: it holds %q", got)
	}
	if fi, _ := os.Stat(root); !fi.ModTime().Equal(old) || fi.Mode().Perm() != 0o700 {
		t.Errorf("the refused directory was touched: mode %#o, modified %v", fi.Mode().Perm(), fi.ModTime())
	}
}

func TestANonEmptyUnmarkedRootIsNotAdopted(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	root := filepath.Join(home, "devices", "ios")
	if err := os.MkdirAll(filepath.Join(root, "ABCD-1234"), 0o700); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "a non-empty unmarked root", Claim(root, "ios", in), ReasonNonEmptyUnownedRoot)
	if _, err := os.Lstat(filepath.Join(root, MarkerName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a marker was written into a refused root: %v", err)
	}
}

func TestASymlinkedMarkerIsRefused(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	mine := claimed(t, filepath.Join(home, "mine"), "ios", in)
	root := claimed(t, filepath.Join(home, "root"), "ios", in)
	marker := filepath.Join(root, MarkerName)
	os.Remove(marker)
	if err := os.Symlink(filepath.Join(mine, MarkerName), marker); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "a marker that links to a good one (check)", Check(root, "ios", in), ReasonSymlink)
	wantRefused(t, "a marker that links to a good one (claim)", Claim(root, "ios", in), ReasonSymlink)
}

func TestAMarkerThatIsNotAFileIsRefused(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	root := claimed(t, filepath.Join(home, "root"), "ios", in)
	marker := filepath.Join(root, MarkerName)
	os.Remove(marker)
	if err := os.Mkdir(marker, 0o700); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "a marker that is a directory", Check(root, "ios", in), ReasonInvalidMarker)
}

func TestAWritableMarkerIsRefused(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	root := claimed(t, filepath.Join(home, "root"), "ios", in)
	chmod(t, filepath.Join(root, MarkerName), 0o620)
	wantRefused(t, "a group-writable marker", Check(root, "ios", in), ReasonWrongPermissions)
}

func TestAGroupWritableRootIsRefused(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	for _, mode := range []fs.FileMode{0o770, 0o707, 0o777, fs.ModeSticky | 0o777} {
		root := claimed(t, filepath.Join(home, mode.String()), "ios", in)
		chmod(t, root, mode)
		wantRefused(t, "a root with mode "+mode.String(), Check(root, "ios", in), ReasonWrongPermissions)
	}
	// Others may read: that lets no one swap anything.
	root := claimed(t, filepath.Join(home, "readable"), "ios", in)
	chmod(t, root, 0o755)
	if err := Check(root, "ios", in); err != nil {
		t.Errorf("a root with mode 0755: %v", err)
	}
}

func TestAGroupWritableParentIsRefused(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)

	shared := filepath.Join(home, "shared")
	root := claimed(t, filepath.Join(shared, "devices", "ios"), "ios", in)
	chmod(t, shared, 0o770)
	err := Check(root, "ios", in)
	wantRefused(t, "a root below a group-writable directory", err, ReasonWrongPermissions)
	var re *RootError
	if errors.As(err, &re) && !strings.Contains(re.Detail, shared) {
		t.Errorf("the detail %q does not name the writable directory %s", re.Detail, shared)
	}

	// Nothing is created below a directory others could swap it in.
	fresh := filepath.Join(home, "open")
	if err := os.Mkdir(fresh, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, fresh, 0o707)
	wantRefused(t, "a new root in a writable directory", Claim(filepath.Join(fresh, "ios"), "ios", in), ReasonWrongPermissions)
	if got := entries(t, fresh); len(got) != 0 {
		t.Errorf("the refused claim left %q in the writable directory", got)
	}
}

// A sticky writable directory on the way (as /tmp is, and the tests' own
// temporary directory sits below it) lets no one else rename the user's
// entries in it, so it is allowed.
func TestAStickyParentIsAllowedAboveTheUsersOwn(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	tmp := filepath.Join(home, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, tmp, fs.ModeSticky|0o777)
	if err := Claim(filepath.Join(tmp, "ios"), "ios", in); err != nil {
		t.Errorf("a new root in a sticky directory: %v", err)
	}
	if err := Claim(filepath.Join(tmp, "me", "android"), "android", in); err != nil {
		t.Errorf("a new root below the user's directory in a sticky one: %v", err)
	}
}

// The directories a symbolic link on the way leads through are judged,
// not the link's own mode (which is always 0777).
func TestAPathThroughASymlinkIsJudgedWhereItLeads(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	real := filepath.Join(home, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(home, "link")); err != nil {
		t.Fatal(err)
	}
	root := claimed(t, filepath.Join(home, "link", "ios"), "ios", in)
	if _, err := os.Lstat(filepath.Join(real, "ios", MarkerName)); err != nil {
		t.Errorf("the root was not made where the link leads: %v", err)
	}
	chmod(t, real, 0o770)
	wantRefused(t, "a root through a link to a group-writable directory", Check(root, "ios", in), ReasonWrongPermissions)
}

// The owner checks, as another user would see this test's own files:
// claim and check take the uid, and the judges take a stat result.
func TestFilesOfAnotherOwnerAreRefused(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	me := os.Geteuid()
	someone := me + 1000
	root := claimed(t, filepath.Join(home, "root"), "ios", in)

	wantRefused(t, "a root owned by another user", check(root, "ios", in, someone), ReasonWrongOwner)

	marker, err := os.Lstat(filepath.Join(root, MarkerName))
	if err != nil {
		t.Fatal(err)
	}
	if r := judgeMarker(marker, me); r != nil {
		t.Errorf("the user's own marker: %+v", r)
	}
	if r := judgeMarker(marker, someone); r == nil || r.reason != ReasonWrongOwner {
		t.Errorf("a marker owned by another user: %+v, want %s", r, ReasonWrongOwner)
	}

	dir := stat{mode: fs.ModeDir | 0o755, uid: someone}
	entry := stat{mode: fs.ModeDir | 0o700, uid: me}
	if r := judgeStep("/srv", dir, "/srv/me", entry, me); r == nil || r.reason != ReasonWrongOwner {
		t.Errorf("a directory on the way owned by another user: %+v, want %s", r, ReasonWrongOwner)
	}
	for _, owner := range []int{0, me} {
		if r := judgeStep("/srv", stat{mode: fs.ModeDir | 0o755, uid: owner}, "/srv/me", entry, me); r != nil {
			t.Errorf("a directory on the way owned by uid %d: %+v", owner, r)
		}
	}
	sticky := stat{mode: fs.ModeDir | fs.ModeSticky | 0o777, uid: 0}
	if r := judgeStep("/tmp", sticky, "/tmp/me", entry, me); r != nil {
		t.Errorf("the user's directory in a sticky one: %+v", r)
	}
	if r := judgeStep("/tmp", sticky, "/tmp/them", stat{mode: fs.ModeDir | 0o755, uid: someone}, me); r == nil || r.reason != ReasonWrongPermissions {
		t.Errorf("another user's directory in a sticky one: %+v, want %s", r, ReasonWrongPermissions)
	}
}

// As root, the same with real files of another owner.
func TestChownedFilesAreRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root; TestFilesOfAnotherOwnerAreRefused covers the checks")
	}
	const someone = 4242
	home := t.TempDir()
	in, _ := LoadInstance(home)

	root := claimed(t, filepath.Join(home, "root"), "ios", in)
	os.Lchown(root, someone, someone)
	wantRefused(t, "a chowned root", Check(root, "ios", in), ReasonWrongOwner)

	root = claimed(t, filepath.Join(home, "marker"), "ios", in)
	os.Lchown(filepath.Join(root, MarkerName), someone, someone)
	wantRefused(t, "a chowned marker", Check(root, "ios", in), ReasonWrongOwner)

	root = claimed(t, filepath.Join(home, "theirs", "ios"), "ios", in)
	os.Lchown(filepath.Dir(root), someone, someone)
	wantRefused(t, "a root in a chowned directory", Check(root, "ios", in), ReasonWrongOwner)

	sticky := filepath.Join(home, "tmp")
	root = claimed(t, filepath.Join(sticky, "them", "ios"), "ios", in)
	chmod(t, sticky, fs.ModeSticky|0o777)
	os.Lchown(filepath.Dir(root), someone, someone)
	wantRefused(t, "a root below another user's directory in a sticky one", Check(root, "ios", in), ReasonWrongPermissions)
}

func TestRootsThatAreRefused(t *testing.T) {
	home := t.TempDir()
	in, _ := LoadInstance(home)
	other := Instance{ID: "ins_other"}

	wantRefused(t, "a relative root", Claim("relative/root", "ios", in), ReasonNotAbsolute)

	theirs := claimed(t, filepath.Join(home, "theirs"), "ios", other)
	wantRefused(t, "another instance's root", Claim(theirs, "ios", in), ReasonWrongInstance)

	bad := claimed(t, filepath.Join(home, "bad"), "ios", in)
	os.WriteFile(filepath.Join(bad, MarkerName), []byte("{not json"), 0o600)
	wantRefused(t, "a broken marker", Claim(bad, "ios", in), ReasonInvalidMarker)

	mine := claimed(t, filepath.Join(home, "mine"), "ios", in)
	link := filepath.Join(home, "link")
	os.Symlink(mine, link)
	wantRefused(t, "a symlinked root", Claim(link, "ios", in), ReasonSymlink)
	wantRefused(t, "another platform's root", Check(mine, "android", in), ReasonWrongInstance)

	file := filepath.Join(home, "file")
	os.WriteFile(file, nil, 0o600)
	wantRefused(t, "a file for a root", Claim(file, "ios", in), ReasonUnreadable)

	gone := claimed(t, filepath.Join(home, "gone"), "android", in)
	os.Remove(filepath.Join(gone, MarkerName))
	wantRefused(t, "a marker removed after the claim", Check(gone, "android", in), ReasonMissingMarker)
}

// stat is a stat result for the judges, owned by anyone.
type stat struct {
	mode fs.FileMode
	uid  int
}

func (s stat) Name() string       { return "x" }
func (s stat) Size() int64        { return 0 }
func (s stat) Mode() fs.FileMode  { return s.mode }
func (s stat) ModTime() time.Time { return time.Time{} }
func (s stat) IsDir() bool        { return s.mode.IsDir() }
func (s stat) Sys() any           { return &syscall.Stat_t{Uid: uint32(s.uid)} }

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

// Package ownership proves that a device root belongs to this simlock
// instance. simlock only ever shuts down, erases or deletes devices inside a
// root it owns: the root holds a marker file naming the instance
// ($SIMLOCK_HOME/instance.json), and a root that fails the check disables
// its platform rather than risk touching someone else's simulators.
//
// simlock owns only roots it created itself. Claim creates a missing root
// whole, marker included, and never adopts a directory that was already
// there, empty or not. Check then refuses any root that someone other than
// the user (or the system) could swap: a root or marker that is a symbolic
// link, is another user's or that others may write to, or a directory on
// the way to the root that others may write to.
//
// Functions here touch only the files they name and are safe to call
// concurrently, on the same root too: concurrent Claims of a missing root
// create it once and agree on it.
package ownership

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/simlock/simlock/internal/homedir"
	"github.com/simlock/simlock/internal/ids"
)

// MarkerName is the marker file at the top of an owned root.
const MarkerName = ".simlock-owned.json"

// InstanceName is the instance file under SIMLOCK_HOME.
const InstanceName = "instance.json"

// Instance identifies one SIMLOCK_HOME for its whole life.
type Instance struct {
	ID        string `json:"instanceId"`
	CreatedAt int64  `json:"createdAt"`
}

// LoadInstance reads home's instance, creating it the first time.
func LoadInstance(home string) (Instance, error) {
	path := filepath.Join(home, InstanceName)
	b, err := homedir.ReadFile(path)
	if err == nil {
		var in Instance
		if err := json.Unmarshal(b, &in); err != nil || in.ID == "" {
			return Instance{}, fmt.Errorf("%s is damaged; it names this simlock instance, so it is not replaced", path)
		}
		return in, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return Instance{}, fmt.Errorf("read instance: %w", err)
	}
	in := Instance{ID: ids.New("ins_", ids.Long), CreatedAt: time.Now().UnixMilli()}
	b, _ = json.Marshal(in)
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	f, err := homedir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		os.Remove(tmp)
		return Instance{}, fmt.Errorf("write instance: %w", err)
	}
	// Link, not rename: if another process created it first, keep theirs.
	if err := os.Link(tmp, path); err != nil {
		os.Remove(tmp)
		if errors.Is(err, os.ErrExist) {
			return LoadInstance(home)
		}
		return Instance{}, fmt.Errorf("write instance: %w", err)
	}
	os.Remove(tmp)
	return in, nil
}

// Reason says why a root is refused. The values are stable: they appear in
// status, doctor and the driver.root-rejected event.
type Reason string

// Reasons a root is refused.
const (
	ReasonNotAbsolute Reason = "not-absolute"
	// ReasonUnreadable is a root that cannot be created or read, or is not
	// a directory.
	ReasonUnreadable Reason = "unreadable"
	// ReasonMissingMarker is an existing root with no marker and nothing
	// else in it, whether it was always so or lost its marker later.
	ReasonMissingMarker Reason = "missing-marker"
	// ReasonInvalidMarker is a marker that is not a regular file or not a
	// simlock marker.
	ReasonInvalidMarker Reason = "invalid-marker"
	// ReasonWrongInstance is a marker naming another simlock home, or the
	// other platform.
	ReasonWrongInstance Reason = "wrong-instance"
	// ReasonSymlink is a root or a marker that is a symbolic link.
	ReasonSymlink Reason = "symlink"
	// ReasonWrongOwner is a root or marker the user does not own, or a
	// directory on the path to the root owned by neither the user nor root.
	ReasonWrongOwner Reason = "wrong-owner"
	// ReasonWrongPermissions is a root or marker, or a directory on the
	// path to the root, that its group or others may write to (a sticky
	// directory such as /tmp is allowed on the path; see Check).
	ReasonWrongPermissions Reason = "wrong-permissions"
	// ReasonNonEmptyUnownedRoot is an existing root with entries but no
	// marker: most likely someone's own device set or AVD home.
	ReasonNonEmptyUnownedRoot Reason = "non-empty-unowned-root"
)

// RootError is a root that failed the ownership check.
type RootError struct {
	Platform string
	Path     string
	Reason   Reason
	Detail   string
}

func (e *RootError) Error() string {
	return fmt.Sprintf("%s device root %s refused (%s): %s", e.Platform, e.Path, e.Reason, e.Detail)
}

// Marker is the content of a root's marker file.
type Marker struct {
	InstanceID string `json:"instanceId"`
	Platform   string `json:"platform"`
	CreatedAt  int64  `json:"createdAt"`
}

// Claim makes sure root belongs to instance. A root that does not exist is
// created (mode 0700, with any missing parents) with its marker already in
// it; an existing one is only checked, as by Check, so a directory simlock
// did not create is never adopted, even an empty one. A root that fails is
// a *RootError.
func Claim(root, platform string, in Instance) error {
	return claim(root, platform, in, os.Geteuid())
}

// Check verifies root without changing anything; drivers call it again
// right before anything destructive.
//
// The root must be a directory, not a symbolic link, that the user owns
// and that neither its group nor others can write to. Its marker must be a
// regular file, not a symbolic link, with the same owner and the same
// restriction, naming this instance and platform. Every directory on the way to the root, from / down and through symbolic
// links as the kernel resolves them, must be owned by the user or by root,
// and writable by no one else, unless it is sticky (as /tmp is) and the
// entry it leads on to is the user's: the sticky bit keeps others from
// renaming or deleting that entry. So a root under the user's own
// directories, under /tmp or not, passes, and one below a shared writable
// directory does not.
func Check(root, platform string, in Instance) error {
	return check(root, platform, in, os.Geteuid())
}

// claim and check are Claim and Check as the user uid, so tests can see
// the owner checks refuse a root made by the account they run as.
func claim(root, platform string, in Instance, uid int) error {
	if _, err := os.Lstat(root); filepath.IsAbs(root) && errors.Is(err, fs.ErrNotExist) {
		if r := create(filepath.Clean(root), platform, in, uid); r != nil {
			return r.about(root, platform)
		}
	}
	return check(root, platform, in, uid)
}

func check(root, platform string, in Instance, uid int) error {
	if r := judge(root, platform, in, uid); r != nil {
		return r.about(root, platform)
	}
	return nil
}

func judge(root, platform string, in Instance, uid int) *refusal {
	if !filepath.IsAbs(root) {
		return refused(ReasonNotAbsolute, "a device root must be an absolute path")
	}
	root = filepath.Clean(root)
	fi, err := os.Lstat(root)
	if err != nil {
		return refused(ReasonUnreadable, "%v", err)
	}
	if r := judgeRoot(fi, uid); r != nil {
		return r
	}
	if r := judgePath(root, uid); r != nil {
		return r
	}
	marker := filepath.Join(root, MarkerName)
	mfi, err := os.Lstat(marker)
	if errors.Is(err, fs.ErrNotExist) {
		entries, err := os.ReadDir(root)
		if err != nil {
			return refused(ReasonUnreadable, "%v", err)
		}
		if len(entries) > 0 {
			return refused(ReasonNonEmptyUnownedRoot, "it holds %d entries and no %s; simlock will not adopt devices it did not create", len(entries), MarkerName)
		}
		return refused(ReasonMissingMarker, "it has no %s; simlock uses only a root it created itself, so remove the directory to let simlock create it", MarkerName)
	}
	if err != nil {
		return refused(ReasonUnreadable, "%v", err)
	}
	if r := judgeMarker(mfi, uid); r != nil {
		return r
	}
	b, err := os.ReadFile(marker)
	if err != nil {
		return refused(ReasonUnreadable, "%v", err)
	}
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil || m.InstanceID == "" {
		return refused(ReasonInvalidMarker, "%s is not a simlock marker", MarkerName)
	}
	if m.InstanceID != in.ID || (m.Platform != "" && m.Platform != platform) {
		return refused(ReasonWrongInstance, "it belongs to simlock instance %s (%s), not %s (%s)", m.InstanceID, m.Platform, in.ID, platform)
	}
	return nil
}

// create makes root, which did not exist, whole or not at all: a staging
// directory beside it gets the marker and is then renamed into place, so
// no one ever sees the root without its marker. A rename that finds
// something already there (another simlock got there first, or anything
// else did) leaves it alone and returns nil: the check that follows judges
// what is there.
func create(root, platform string, in Instance, uid int) *refusal {
	// Nothing is made on a path others could swap.
	if r := judgePath(root, uid); r != nil {
		return r
	}
	parent := filepath.Dir(root)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return refused(ReasonUnreadable, "create its parent: %v", err)
	}
	staging, err := os.MkdirTemp(parent, "."+filepath.Base(root)+".*.staging")
	if err != nil {
		return refused(ReasonUnreadable, "create it: %v", err)
	}
	// MkdirTemp's 0700 is subject to the umask, which could leave simlock
	// unable to write the marker.
	err = os.Chmod(staging, 0o700)
	if err == nil {
		err = writeMarker(staging, Marker{InstanceID: in.ID, Platform: platform, CreatedAt: time.Now().UnixMilli()})
	}
	if err == nil {
		// os.Rename refuses to replace a directory, and rename(2) a
		// non-empty one, which every root simlock made is.
		if err = os.Rename(staging, root); err == nil {
			return nil
		}
	}
	os.RemoveAll(staging)
	if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
		return nil
	}
	return refused(ReasonUnreadable, "create it: %v", err)
}

// writeMarker writes the marker durably: a root renamed into place after a
// crash must not hold an empty marker, which would refuse it for good.
func writeMarker(dir string, m Marker) error {
	b, _ := json.Marshal(m)
	f, err := os.OpenFile(filepath.Join(dir, MarkerName), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write marker: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write marker: %w", err)
	}
	return nil
}

// refusal is a reason and its detail, before it knows which root it is
// about.
type refusal struct {
	reason Reason
	detail string
}

func refused(reason Reason, format string, args ...any) *refusal {
	return &refusal{reason: reason, detail: fmt.Sprintf(format, args...)}
}

func (r *refusal) about(root, platform string) *RootError {
	return &RootError{Platform: platform, Path: root, Reason: r.reason, Detail: r.detail}
}

// judgeRoot judges the root's own Lstat.
func judgeRoot(fi fs.FileInfo, uid int) *refusal {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return refused(ReasonSymlink, "a device root must not be a symbolic link")
	}
	if !fi.IsDir() {
		return refused(ReasonUnreadable, "not a directory")
	}
	if owner := ownerOf(fi); owner != uid {
		return refused(ReasonWrongOwner, "owned by uid %d, not %d", owner, uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return refused(ReasonWrongPermissions, "mode %#o lets its group or others write to it", fi.Mode().Perm())
	}
	return nil
}

// judgeMarker judges the marker's Lstat: it must be the user's own regular
// file, which only the user can rewrite.
func judgeMarker(fi fs.FileInfo, uid int) *refusal {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return refused(ReasonSymlink, "%s is a symbolic link", MarkerName)
	}
	if !fi.Mode().IsRegular() {
		return refused(ReasonInvalidMarker, "%s is not a regular file", MarkerName)
	}
	if owner := ownerOf(fi); owner != uid {
		return refused(ReasonWrongOwner, "%s is owned by uid %d, not %d", MarkerName, owner, uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return refused(ReasonWrongPermissions, "%s has mode %#o, which lets its group or others rewrite it", MarkerName, fi.Mode().Perm())
	}
	return nil
}

// maxLinks bounds the symbolic links judgePath follows, as the kernel's
// own limit does.
const maxLinks = 40

// judgePath walks from / to path the way the kernel resolves it and judges
// every directory it passes through, with the entry it leads on to (see
// Check for the rule). It stops at the first entry that does not exist:
// only create calls it on such a path, and makes the rest itself.
func judgePath(path string, uid int) *refusal {
	dir := string(filepath.Separator)
	rest := parts(path)
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		if name == ".." {
			dir = filepath.Dir(dir)
			continue
		}
		dfi, err := os.Lstat(dir)
		if err != nil {
			return refused(ReasonUnreadable, "%v", err)
		}
		next := filepath.Join(dir, name)
		nfi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return judgeStep(dir, dfi, next, nil, uid)
		}
		if err != nil {
			return refused(ReasonUnreadable, "%v", err)
		}
		if r := judgeStep(dir, dfi, next, nfi, uid); r != nil {
			return r
		}
		if nfi.Mode()&fs.ModeSymlink == 0 {
			dir = next
			continue
		}
		if links++; links > maxLinks {
			return refused(ReasonUnreadable, "too many symbolic links on the way to it")
		}
		target, err := os.Readlink(next)
		if err != nil {
			return refused(ReasonUnreadable, "%v", err)
		}
		if filepath.IsAbs(target) {
			dir = string(filepath.Separator)
		}
		rest = append(parts(target), rest...)
	}
	return nil
}

// judgeStep judges dir, on the way to the root, which leads on to next
// (nfi is nil when next does not exist yet and simlock will make it).
func judgeStep(dir string, dfi fs.FileInfo, next string, nfi fs.FileInfo, uid int) *refusal {
	if owner := ownerOf(dfi); owner != uid && owner != 0 {
		return refused(ReasonWrongOwner, "%s, on the way to it, is owned by uid %d, who could replace %s", dir, owner, next)
	}
	perm := dfi.Mode().Perm()
	if perm&0o022 == 0 {
		return nil
	}
	if dfi.Mode()&fs.ModeSticky != 0 && (nfi == nil || ownerOf(nfi) == uid) {
		return nil
	}
	return refused(ReasonWrongPermissions, "%s, on the way to it, has mode %#o, which lets its group or others replace %s", dir, perm, next)
}

func parts(path string) []string {
	var out []string
	for _, p := range strings.Split(path, string(filepath.Separator)) {
		if p != "" && p != "." {
			out = append(out, p)
		}
	}
	return out
}

// ownerOf is fi's owner, or -1 when the platform does not say, which no
// check accepts.
func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// Inside reports whether path is root or below it, after cleaning both; a
// device outside its root is never acted on.
func Inside(root, path string) bool {
	rel, err := filepath.Rel(filepath.Clean(root), filepath.Clean(path))
	return err == nil && rel != ".." && !filepath.IsAbs(rel) && (rel == "." || !startsWithDotDot(rel))
}

func startsWithDotDot(rel string) bool {
	return len(rel) >= 3 && rel[:3] == ".."+string(filepath.Separator)
}

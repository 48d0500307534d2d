// Package ownership proves that a device root belongs to this simlock
// instance. simlock only ever shuts down, erases or deletes devices inside a
// root it owns: the root holds a marker file naming the instance
// ($SIMLOCK_HOME/instance.json), and a root that fails the check disables
// its platform rather than risk touching someone else's simulators.
//
// Functions here touch only the files they name and are safe to call
// concurrently on different roots.
package ownership

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
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
	b, err := os.ReadFile(path)
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
	var id [16]byte
	_, _ = rand.Read(id[:])
	in := Instance{ID: "ins_" + hex.EncodeToString(id[:]), CreatedAt: time.Now().UnixMilli()}
	b, _ = json.Marshal(in)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
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

// Reasons a root is refused.
const (
	ReasonNotAbsolute         = "not-absolute"
	ReasonMissingMarker       = "missing-marker"
	ReasonInvalidMarker       = "invalid-marker"
	ReasonWrongInstance       = "wrong-instance"
	ReasonSymlink             = "symlink"
	ReasonWrongOwner          = "wrong-owner"
	ReasonWrongPermissions    = "wrong-permissions"
	ReasonNonEmptyUnownedRoot = "non-empty-unowned-root"
	ReasonUnreadable          = "unreadable"
)

// RootError is a root that failed the ownership check.
type RootError struct {
	Platform string
	Path     string
	Reason   string
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

// Claim makes sure root belongs to instance: a missing or empty directory
// is created (mode 0700) and marked; an existing marked one must name this
// instance and platform. Anything else is a *RootError.
func Claim(root, platform string, in Instance) error {
	refuse := func(reason, format string, args ...any) error {
		return &RootError{Platform: platform, Path: root, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	if !filepath.IsAbs(root) {
		return refuse(ReasonNotAbsolute, "a device root must be an absolute path")
	}
	if _, err := os.Lstat(root); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return refuse(ReasonUnreadable, "create it: %v", err)
		}
	}
	if err := checkDir(root, platform); err != nil {
		return err
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return refuse(ReasonUnreadable, "%v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, MarkerName)); errors.Is(err, os.ErrNotExist) {
		if len(entries) > 0 {
			return refuse(ReasonNonEmptyUnownedRoot, "it holds %d entries and no %s; simlock will not adopt devices it did not create", len(entries), MarkerName)
		}
		b, _ := json.Marshal(Marker{InstanceID: in.ID, Platform: platform, CreatedAt: time.Now().UnixMilli()})
		if err := os.WriteFile(filepath.Join(root, MarkerName), b, 0o600); err != nil {
			return refuse(ReasonUnreadable, "write marker: %v", err)
		}
	}
	return Check(root, platform, in)
}

// Check verifies root without changing anything; drivers call it again
// right before anything destructive.
func Check(root, platform string, in Instance) error {
	refuse := func(reason, format string, args ...any) error {
		return &RootError{Platform: platform, Path: root, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	if !filepath.IsAbs(root) {
		return refuse(ReasonNotAbsolute, "a device root must be an absolute path")
	}
	if err := checkDir(root, platform); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(root, MarkerName))
	if errors.Is(err, os.ErrNotExist) {
		return refuse(ReasonMissingMarker, "no %s", MarkerName)
	}
	if err != nil {
		return refuse(ReasonUnreadable, "%v", err)
	}
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil || m.InstanceID == "" {
		return refuse(ReasonInvalidMarker, "%s is not a simlock marker", MarkerName)
	}
	if m.InstanceID != in.ID || (m.Platform != "" && m.Platform != platform) {
		return refuse(ReasonWrongInstance, "it belongs to simlock instance %s (%s), not %s (%s)", m.InstanceID, m.Platform, in.ID, platform)
	}
	return nil
}

// checkDir refuses symlinks, other owners and group- or world-writable
// directories: each would let something else swap the devices under us.
func checkDir(root, platform string) error {
	refuse := func(reason, format string, args ...any) error {
		return &RootError{Platform: platform, Path: root, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return refuse(ReasonUnreadable, "%v", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return refuse(ReasonSymlink, "a device root must not be a symbolic link")
	}
	if !fi.IsDir() {
		return refuse(ReasonUnreadable, "not a directory")
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return refuse(ReasonWrongOwner, "owned by uid %d, not %d", st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return refuse(ReasonWrongPermissions, "mode %o lets others write to it", fi.Mode().Perm())
	}
	return nil
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

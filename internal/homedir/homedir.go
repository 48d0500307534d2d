// Package homedir keeps SIMLOCK_HOME private to its user: Prepare makes the
// directory, or tightens an existing one to 0700, and refuses one another
// user owns; OpenFile and ReadFile open the files simlock keeps there
// (its database, lock, admin token, logs, config, records) without ever
// following a symbolic link, so a link planted in the home cannot turn a
// write of simlock's into a write somewhere else, or a read into a read of
// another file.
//
// Its functions hold no state and are safe for concurrent use.
package homedir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrSymlink is wrapped by the errors of OpenFile, ReadFile and
// RefuseLinks for a file that is a symbolic link.
var ErrSymlink = errors.New("is a symbolic link, which simlock never follows in SIMLOCK_HOME")

// Info is what the home's check reads of the directory.
type Info struct {
	IsDir bool
	UID   int
	Perm  fs.FileMode
}

// Check is the rule for an existing home, as a pure function of what Stat
// read and the user's uid: a home that is not a directory, or that another
// user owns, is refused (whoever owns it could read the admin token and the
// database, or swap the files under simlock); one group or others may
// enter is to be tightened to 0700.
func Check(home string, info Info, uid int) (tighten bool, err error) {
	switch {
	case !info.IsDir:
		return false, fmt.Errorf("SIMLOCK_HOME %s is not a directory", home)
	case info.UID != uid:
		return false, fmt.Errorf("SIMLOCK_HOME %s belongs to uid %d, not to this user (uid %d): simlock keeps its admin token, database and socket only in a directory of its own user; use another SIMLOCK_HOME, or give this one to this user", home, info.UID, uid)
	}
	return info.Perm&0o077 != 0, nil
}

// Prepare makes home (mode 0700, with any missing parents) or, when it
// exists, checks it (Check) and tightens it to 0700.
func Prepare(home string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("create SIMLOCK_HOME: %w", err)
	}
	fi, err := os.Stat(home)
	if err != nil {
		return fmt.Errorf("SIMLOCK_HOME: %w", err)
	}
	info := Info{IsDir: fi.IsDir(), UID: -1, Perm: fi.Mode().Perm()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.UID = int(st.Uid)
	}
	tighten, err := Check(home, info, os.Getuid())
	if err != nil {
		return err
	}
	if tighten {
		if err := os.Chmod(home, 0o700); err != nil {
			return fmt.Errorf("tighten SIMLOCK_HOME %s to 0700: %w", home, err)
		}
	}
	return nil
}

// OpenFile is os.OpenFile that refuses a symbolic link (ErrSymlink) where
// it would follow it, creating included.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag|syscall.O_NOFOLLOW, perm)
	if err != nil && errors.Is(err, syscall.ELOOP) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrSymlink}
	}
	return f, err
}

// ReadFile is os.ReadFile through OpenFile.
func ReadFile(name string) ([]byte, error) {
	f, err := OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// RefuseLinks checks the files another library opens by itself (SQLite's
// database, -wal and -shm files): one that is a symbolic link is refused
// (ErrSymlink); one that does not exist is fine.
func RefuseLinks(names ...string) error {
	for _, name := range names {
		fi, err := os.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return &fs.PathError{Op: "open", Path: name, Err: ErrSymlink}
		}
	}
	return nil
}

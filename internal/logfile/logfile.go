// Package logfile is the daemon's log file: appended to, and rotated when it
// would grow past its bound, so that a daemon running for months keeps a
// few files of the latest lines rather than one that fills the disk.
package logfile

import (
	"fmt"
	"github.com/simlock/simlock/internal/homedir"
	"os"
	"sync"
)

// Kept is how many rotated files are kept beside the live one: path.1 (the
// newest) to path.3.
const Kept = 3

// File is a log file that rotates. Each Write goes whole into one file: a
// write that would take the file past MaxBytes first moves it to path.1
// (path.1 to path.2, and so on, the oldest dropped), then starts a new one.
type File struct {
	path     string
	maxBytes int64

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens (or creates) path for appending, private to the user, rotating
// past maxBytes; maxBytes 0 or less never rotates.
func Open(path string, maxBytes int64) (*File, error) {
	l := &File{path: path, maxBytes: maxBytes}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *File) open() error {
	f, err := homedir.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Write appends p, rotating first when p would take the file past its
// bound (a file with nothing in it yet takes p whatever its size).
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxBytes > 0 && l.size > 0 && l.size+int64(len(p)) > l.maxBytes {
		if err := l.rotate(); err != nil {
			// Keep logging into the file we have rather than lose lines,
			// and try again only another maxBytes later, not at every line.
			fmt.Fprintf(os.Stderr, "simlock: rotating %s: %v\n", l.path, err)
			l.size = 0
		}
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// rotate shifts path.N to path.N+1 (dropping the oldest), path to path.1,
// and opens a new path. l.mu must be held.
func (l *File) rotate() error {
	if err := l.f.Close(); err != nil {
		return l.reopen(err)
	}
	for i := Kept - 1; i >= 1; i-- {
		if err := os.Rename(fmt.Sprintf("%s.%d", l.path, i), fmt.Sprintf("%s.%d", l.path, i+1)); err != nil && !os.IsNotExist(err) {
			return l.reopen(err)
		}
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return l.reopen(err)
	}
	return l.open()
}

// reopen opens path again after a failed rotation, returning the failure.
func (l *File) reopen(cause error) error {
	if err := l.open(); err != nil {
		return fmt.Errorf("%w; reopening: %v", cause, err)
	}
	return cause
}

// Close closes the file.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

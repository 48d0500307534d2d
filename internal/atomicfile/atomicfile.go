// Package atomicfile replaces a file whole: a reader sees the old content
// or the new, never a part of either.
package atomicfile

import (
	"fmt"
	"github.com/simlock/simlock/internal/homedir"
	"os"
)

// Write replaces path with data, mode perm: it writes path.tmp and renames
// it over path. A path.tmp a crash left behind is removed first; the new
// one is created afresh (never through a link, never an existing file), and
// a failed write or rename removes it again. The rename replaces whatever
// path is, a link included, without following it.
func Write(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	f, err := homedir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

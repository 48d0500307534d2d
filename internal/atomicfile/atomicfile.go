// Package atomicfile replaces a file whole: a reader sees the old content
// or the new, never a part of either.
package atomicfile

import (
	"fmt"
	"os"
)

// Write replaces path with data, mode perm: it writes path.tmp and renames
// it over path. A path.tmp a crash left behind is removed first, since
// os.WriteFile keeps an existing file's mode, and a failed write or rename
// removes it again.
func Write(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if err := os.WriteFile(tmp, data, perm); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

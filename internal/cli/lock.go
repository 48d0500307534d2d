package cli

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/homedir"
)

// waitUnlocked waits until nobody holds the daemon's lock file.
func waitUnlocked(ctx context.Context, path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		f, err := homedir.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return nil
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
			return nil
		}
		f.Close()
		if time.Now().After(deadline) {
			return contract.Errorf(contract.CodeInternal, "the daemon did not stop within %s", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

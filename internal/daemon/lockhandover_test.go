package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
)

// The home's lock, still held, handed over by the run before (a deposed
// replica running itself again) is taken as the home's: the new run
// starts although the lock was never let go. A descriptor that is not the
// home's lock file is not taken for it, so the home stays someone else's.
func TestAHandedOverLockIsTakenOnlyWhenItIsTheHomesLock(t *testing.T) {
	home := t.TempDir()
	held, err := os.OpenFile(filepath.Join(home, LockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	other, err := os.Create(filepath.Join(t.TempDir(), "not-the-lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	opts := func(lock *os.File) Options {
		return Options{Home: home, Version: "test", Config: config.Default(), Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}, Lock: lock}
	}

	if _, err := Start(context.Background(), opts(other)); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("a start handed a file that is not the home's lock, while the lock is held: %v, want ErrAlreadyRunning", err)
	}
	d, err := Start(context.Background(), opts(held))
	if err != nil {
		t.Fatalf("a start handed the home's lock, still held: %v, want it to run", err)
	}
	if err := d.Stop("test over"); err != nil {
		t.Fatal(err)
	}
	if d.HandOverLock() != nil {
		t.Errorf("a daemon that stopped as asked hands its lock over; only a deposed replica does")
	}
}

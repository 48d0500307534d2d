package daemon

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/transfer"
)

// The lease-end participants are idle for a lease that has nothing of
// theirs, and not for one with a transfer (opening or open), a staging
// directory left, or a command running: only then does the engine call
// them between the release and the clean.
func TestLeaseEndParticipantsAreIdleOnlyForALeaseWithNothingOfTheirs(t *testing.T) {
	d := &Daemon{opts: Options{Home: t.TempDir()}, transfers: transfer.New(transfer.Options{MaxBytes: 10, Idle: time.Minute})}
	staging, exec := stagingParticipant{d}, execParticipant{d}
	ended := leasing.EndedLease{LeaseID: "lse_1", OwnerID: "agent"}
	if !staging.IdleFor(ended) || !exec.IdleFor(ended) {
		t.Fatalf("idle for a lease with nothing: staging %v, exec %v; want both", staging.IdleFor(ended), exec.IdleFor(ended))
	}

	opened := make(chan struct{})
	release, closed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = d.transfers.Open(context.Background(), transfer.Open{Owner: "agent", Lease: "lse_1", LeaseID: "lse_1", Direction: contract.TransferUpload},
			func(context.Context) (transfer.Session, int64, error) {
				close(opened)
				<-release
				return nil, 0, context.Canceled
			})
	}()
	<-opened
	if staging.IdleFor(ended) {
		t.Errorf("the staging participant is idle for a lease whose transfer is opening")
	}
	close(release)
	<-closed // the failed open left the table

	if err := os.MkdirAll(d.leaseStaging("lse_1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if staging.IdleFor(ended) {
		t.Errorf("the staging participant is idle for a lease whose staging directory is left")
	}
	if err := os.Remove(d.leaseStaging("lse_1")); err != nil {
		t.Fatal(err)
	}
	if !staging.IdleFor(ended) {
		t.Errorf("the staging participant is not idle once the directory is gone")
	}

	done, ok := d.execs.take(execKey{"agent", "lse_1"}, 1, func(error) {})
	if !ok {
		t.Fatal("no command slot")
	}
	if exec.IdleFor(ended) {
		t.Errorf("the command participant is idle for a lease with a command running")
	}
	if other := (leasing.EndedLease{LeaseID: "lse_1", OwnerID: "someone-else"}); !exec.IdleFor(other) {
		t.Errorf("the command participant is not idle for another owner's lease of the same key")
	}
	done()
	if !exec.IdleFor(ended) {
		t.Errorf("the command participant is not idle once the command gave its slot back")
	}
}

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/sqlite"
)

// openFloorCommit opens a scratch database at path and returns the store's
// floor commit on it: what a renewal writes (one lease row updated, one
// event appended) in one transaction, through the same prepared statements
// as every decision. The first commit seeds the scratch rows and is not
// timed.
func openFloorCommit(ctx context.Context, path string) (commit func(context.Context) error, closeDB func() error, err error) {
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	if err := db.CommitFloor(ctx); err != nil {
		db.Close()
		return nil, nil, err
	}
	return db.CommitFloor, db.Close, nil
}

// appendEvents fills the event log of a stopped daemon's database to total
// stored events (lease.renewed of the given leases), in transactions of
// 10,000, and returns how many it holds. The database is fresh, so its
// last seq is its event count.
func appendEvents(ctx context.Context, path string, total int, leaseIDs []string) (int, error) {
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return 0, benchError("open the daemon's database", err)
	}
	defer db.Close()
	last, err := db.LastSeq(ctx)
	if err != nil {
		return 0, benchError("read the event log", err)
	}
	now := time.Now().UnixMilli()
	const ttl = 86_400_000
	for have := int(last); have < total; {
		batch := make([]store.NewEvent, min(10_000, total-have))
		for i := range batch {
			k := have + i
			payload, _ := json.Marshal(map[string]any{"leaseId": leaseIDs[k%len(leaseIDs)], "ttlDeadline": now + ttl, "ttlMs": ttl})
			batch[i] = store.NewEvent{ID: fmt.Sprintf("evt_bench%010d", k), Timestamp: now, Event: contract.EvLeaseRenewed, Payload: payload}
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if _, err := db.Commit(ctx, store.Change{Events: batch}); err != nil {
			return 0, benchError("append events", err)
		}
		have += len(batch)
	}
	return max(int(last), total), nil
}

// floorSampler times floor commits in a scratch database, a few before each
// timed series, so the floor is measured across the whole run, as the disk
// and the machine were while the rows were: one measurement at one moment
// can land on a quiet or a busy spell and skew every ratio.
type floorSampler struct {
	commit  func(context.Context) error
	closeDB func() error
	times   []time.Duration
	// idle are the same commit, each after floorIdleGap of doing nothing:
	// what a commit costs a daemon that waited for its next request.
	idle []time.Duration
}

// floorIdleGap is the pause before each idle floor commit, about what a
// daemon waits between two requests of one client.
const floorIdleGap = 300 * time.Microsecond

func openFloor(ctx context.Context, dir string) (*floorSampler, error) {
	commit, closeDB, err := openFloorCommit(ctx, filepath.Join(dir, "floor.db"))
	if err != nil {
		return nil, benchError("floor database", err)
	}
	return &floorSampler{commit: commit, closeDB: closeDB}, nil
}

// take times n floor commits back to back (the floor), then n more each
// after an idle pause.
func (f *floorSampler) take(ctx context.Context, n int) error {
	for i := range 2 * max(n, 1) {
		if err := ctx.Err(); err != nil {
			return err
		}
		idle := i >= max(n, 1)
		if idle {
			time.Sleep(floorIdleGap) // the condition measured, not a wait for anything
		}
		t0 := time.Now()
		if err := f.commit(ctx); err != nil {
			return benchError("floor commit", err)
		}
		if idle {
			f.idle = append(f.idle, time.Since(t0))
		} else {
			f.times = append(f.times, time.Since(t0))
		}
	}
	return nil
}

func (f *floorSampler) stat() benchStat { return summarize(f.times) }

func (f *floorSampler) idleStat() benchStat { return summarize(f.idle) }

// openFloorIn opens the floor's scratch database in a folder "floor" of
// root, made for it.
func openFloorIn(ctx context.Context, root string) (*floorSampler, error) {
	dir := filepath.Join(root, "floor")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return openFloor(ctx, dir)
}

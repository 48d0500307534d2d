package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/ids"
	"github.com/simlock/simlock/internal/store"
)

// The scratch rows CommitFloor updates. The device is deleted and the lease
// has ended, so Load never returns either: a daemon that opens the database
// does not see them.
const (
	floorDevice = "dev_store_floor"
	floorLease  = "lse_store_floor"
	// FloorEvent names the events CommitFloor appends.
	FloorEvent = "store.floor"
)

// CommitFloor commits the smallest decision there is, the one a lease renewal
// makes: one lease row updated and one event appended, in one transaction,
// through Commit and its prepared statements. It exists for benchmarks:
// timing it gives the floor under every operation that commits a decision,
// on the same machine and disk as the operation measured against it
// (BenchmarkCommitRenew times the same call).
//
// The first call on a database also writes the scratch device and lease the
// later ones update, so time the calls after it.
//
// Call it on a scratch database. On a live one it leaves the daemon's
// devices, leases and requests alone, but every call appends a [FloorEvent]
// to the event log that clients read.
//
// It is safe to call concurrently with every other method.
func (db *DB) CommitFloor(ctx context.Context) error {
	err := db.commitFloor(ctx)
	if errors.Is(err, errNotStored) {
		// Pruned under it (it ended at the epoch): seed it again.
		db.floorMu.Lock()
		db.floorSeeded = false
		db.floorMu.Unlock()
		err = db.commitFloor(ctx)
	}
	if err != nil {
		return fmt.Errorf("store: commit floor: %w", err)
	}
	return nil
}

func (db *DB) commitFloor(ctx context.Context) error {
	was, err := db.seedFloor(ctx)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	l := floorLeaseAt(max(now, was.LastRenewedAt+1)) // always a change, even within a millisecond
	// As a renewal's commit: the lease is known to be stored, so only the
	// columns a renewal moves are written.
	_, err = db.Commit(ctx, store.Change{
		Before: store.Before{Leases: map[string]store.Lease{floorLease: was}},
		Leases: []store.Lease{l},
		Events: []store.NewEvent{{
			ID:        floorEventID(),
			Timestamp: now,
			Event:     FloorEvent,
			Payload:   json.RawMessage(`{"leaseId":"` + floorLease + `"}`),
		}},
	})
	if err != nil {
		return err
	}
	db.floorMu.Lock()
	db.floorLast = l
	db.floorMu.Unlock()
	return nil
}

// seedFloor writes the scratch device and lease once per DB. Writing them
// again on a database that already has them (another process seeded it) is
// an update, so it is harmless.
func (db *DB) seedFloor(ctx context.Context) (store.Lease, error) {
	db.floorMu.Lock()
	defer db.floorMu.Unlock()
	if db.floorSeeded {
		return db.floorLast, nil
	}
	l := floorLeaseAt(1)
	_, err := db.Commit(ctx, store.Change{
		Devices: []store.Device{{
			ID:             floorDevice,
			Platform:       contract.PlatformIOS,
			Model:          "store floor",
			Driver:         "none",
			DriverDeviceID: floorDevice,
			State:          contract.DeviceDeleted,
			CreatedAt:      1,
			StateSince:     1,
		}},
		Leases: []store.Lease{l},
	})
	if err != nil {
		return store.Lease{}, fmt.Errorf("seed: %w", err)
	}
	db.floorSeeded, db.floorLast = true, l
	return l, nil
}

// floorLeaseAt is the scratch lease as renewed at now. It was granted and
// ended at the epoch, so it is never loaded as active; only the columns a
// renewal moves change from one call to the next, as in a real renewal.
// PruneLeases may delete it (it ended at the epoch); the next call then
// writes it again.
func floorLeaseAt(now int64) store.Lease {
	const ttl = 60_000
	return store.Lease{
		LeaseRecord: contract.LeaseRecord{
			ID:            floorLease,
			DeviceID:      floorDevice,
			RequesterID:   "store-floor",
			OwnerID:       "store-floor",
			GrantedAt:     1,
			TTLMs:         ttl,
			LastRenewedAt: now,
			TTLDeadline:   now + ttl,
		},
		EndedAt:   1,
		EndReason: "floor",
	}
}

// floorEventID makes an event id of the form every event id has: evt_ and 16
// random hex digits.
func floorEventID() string {
	return ids.New("evt_", ids.Short)
}

// Package store defines the records the simlock daemon keeps durable:
// devices, leases, lease requests, the event log and HTTP tokens, and the
// units in which they are written and read back. It holds no I/O; the
// database lives in a backend (internal/store/sqlite), and each consumer
// declares the few methods it needs of one (the lease engine's
// leasing.Store, for example).
//
// The store decides nothing. The lease engine owns every state transition
// and hands a backend the outcome of each decision as one [Change]. A backend
// must guarantee, for every Change it is given:
//
//   - Atomicity: the whole Change is durable, or none of it is. A failed
//     commit leaves the database as it was, and the caller may undo its
//     in-memory state knowing the two agree.
//   - One write per row: a Change may name the same device, lease or request
//     more than once (a decision can touch a device twice); the last version
//     of each is the one stored.
//   - Order: devices are written before leases, so a lease may name a device
//     created by the same Change; events are appended in the order given,
//     every one of them.
//   - Seqs: the committed events come back with the seqs the backend
//     assigned, in order. Seqs only increase and are never handed out twice,
//     even after the log is pruned.
//   - Serial commits: Changes are applied one at a time, in the order of the
//     calls, so the order of seqs is the order of decisions.
//
// A backend may also let a decision take its write lock before it is made
// ([Reserver]): the lease engine then changes nothing in memory until the
// lock is held, so a database locked by another process fails the one call
// that met it, and no decision is ever made that could not be saved for
// want of the lock.
//
// Records are stored as given. A backend refuses only what would corrupt it
// or make a later read fail (an empty ID, malformed JSON); it does not check
// state transitions.
//
// The types here are plain values, safe to copy and to share between
// goroutines as long as no one mutates a shared slice or json.RawMessage.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/simlock/simlock/internal/contract"
)

// Device is a stored device record.
type Device struct {
	ID        string
	Platform  contract.Platform
	Model     string
	OSVersion string
	// ImageTag is the Android system image's tag the device was made
	// from; "" where the platform has none.
	ImageTag string
	// Mode is slim for a device made slim (DeviceSpec.Mode), "" for a
	// full one; Slimmed whether its slim pass is in effect now.
	Mode           contract.DeviceMode
	Slimmed        bool
	Driver         string
	DriverDeviceID string
	Address        string
	DriverData     json.RawMessage
	State          contract.DeviceState
	CreatedAt      int64
	StateSince     int64
	LastUsedAt     int64
	// DeferredReclaim marks a device whose next clean must be a full wipe:
	// set when its lease ended and its clean was put off (lease-end
	// participants running, its platform unreadable at startup), cleared
	// when the device leaves reclaiming.
	DeferredReclaim bool
	// QuarantineAttempts counts the retries made to recover a quarantined
	// device; QuarantineNextRetry is when the next one is due (epoch ms, 0
	// for none).
	QuarantineAttempts  int
	QuarantineNextRetry int64
}

// Lease is a stored lease; EndedAt 0 means active.
type Lease struct {
	contract.LeaseRecord
	RequestID string
	EndedAt   int64
	EndReason string
	// BoundPIDStartedAt is when the process BoundPID names started (epoch
	// ms): with the pid, it names one process even after the pid is reused.
	BoundPIDStartedAt int64
}

// NewEvent is an event to append; the backend assigns its seq.
type NewEvent struct {
	ID        string
	Timestamp int64
	Event     string
	Payload   json.RawMessage
}

// Change is one decision: everything in it commits in one transaction or not
// at all. See the package documentation for what a backend guarantees.
type Change struct {
	Devices  []Device                      // upserted by ID; the last of an ID wins
	Leases   []Lease                       // upserted by UniqueKey; the last of a key wins
	Requests []contract.LeaseRequestRecord // upserted by ID (record JSON + indexed columns); the last of an ID wins
	Events   []NewEvent                    // appended in order, all of them
	// Clock, when set, replaces the stored clock reading: the decision
	// that moves the stored times after the wall clock jumped writes the
	// reading they are in step with, in the same transaction.
	Clock *Clock
	// Grants are a gateway's grant records to write (upserted by Key), and
	// EndedGrants the keys of those to delete, after the writes.
	Grants      []Grant
	EndedGrants []string
	// Before holds, for devices and leases the caller knows are stored, the
	// version stored now. A backend then writes only the columns that
	// differ (a renewal changes three columns of one lease row and no
	// index), and nothing for a row that did not change. Rows not named
	// here are written whole.
	Before Before
}

// Before is what a Change's rows were before it, by id (a lease by its
// UniqueKey).
type Before struct {
	Devices map[string]Device
	Leases  map[string]Lease
}

// Empty reports whether c writes nothing.
func (c Change) Empty() bool {
	return len(c.Devices) == 0 && len(c.Leases) == 0 && len(c.Requests) == 0 && len(c.Events) == 0 && c.Clock == nil &&
		len(c.Grants) == 0 && len(c.EndedGrants) == 0
}

// Clock is a clock reading the stored times are in step with: the wall
// clock, and real time since the machine booted with the boot's id (see
// internal/wallclock).
type Clock struct {
	WallMs int64
	BootNs int64
	BootID string
}

// Reserver is a backend that can take its write lock ahead of a decision,
// so that the decision is made only once nothing can stop it from being
// saved: a lock another process holds on the database is then met before
// anything changes, and is the failure of that one call, not of a decision
// already made in memory.
type Reserver interface {
	// Reserve takes the write lock, waiting for another holder at most
	// the backend's own bound (SQLite's busy_timeout) or until ctx ends.
	// An error that is another holder's lock wraps ErrBusy.
	Reserve(ctx context.Context) (Reservation, error)
}

// Reservation is the write lock held for one decision. Commit writes the
// decision under it, as a Commit would, and gives it back; Release gives
// it back unused. Either may be called more than once; only the first
// counts. A Reservation is used by one goroutine.
type Reservation interface {
	Commit(ctx context.Context, c Change) ([]contract.Event, error)
	Release()
}

// ErrBusy is another process's lock on the database, still held when the
// wait for it ended.
var ErrBusy = errors.New("the database is locked by another process")

// Snapshot is what a starting daemon loads.
type Snapshot struct {
	Devices  []Device                      // every device whose state is not "deleted", ordered by created_at
	Leases   []Lease                       // active leases only (ended_at = 0), ordered by granted_at
	Requests []contract.LeaseRequestRecord // requests whose state is not terminal (queued/starting), ordered by created_at
}

// EventQuery selects events from the log. With SinceTs or AfterSeq set, a
// backend returns the oldest Limit events that match, so a reader can page
// forward by seq; with neither, the newest Limit events. Either way they come
// oldest first.
type EventQuery struct {
	SinceTs  int64 // when > 0, only events with timestamp >= SinceTs
	AfterSeq int64 // when > 0, only events with seq > AfterSeq
	Limit    int   // at most this many; <= 0 means 1000
}

// EventLogSpan is the event log's extent: the oldest event kept (seq and
// timestamp, 0 when the log is empty), the newest seq ever given, and how
// many events the log holds. Every backend keeps the log a run of
// consecutive seqs (appends take the next ones, pruning deletes a prefix),
// so Events is the span's length.
type EventLogSpan struct {
	OldestSeq, OldestTs, LastSeq, Events int64
}

// Token is a stored HTTP token: its record and the hex SHA-256 of its secret.
type Token struct {
	contract.TokenRecord
	Hash string
}

// Worker is a gateway's record of one worker: which it knows, which are
// drained, and how far its events were relayed.
type Worker struct {
	ID      string
	Label   string
	Drained bool
	// LastSeq is the worker's seq of the last event relayed.
	LastSeq    int64
	LastSeenAt int64
	// TokenID is the join token the worker id belongs to.
	TokenID string
}

// Grant is a gateway's record of a lease it granted through one of its
// workers: written in the commit that grants the request (so no requester
// hears of a grant that is not recorded), deleted when the gateway learns
// the lease ended. A gateway's lease index is rebuilt from these, never
// from what a worker reports.
type Grant struct {
	// Key is the gateway's unique name for the lease:
	// <WorkerID>.<WorkerLeaseID>.
	Key           string
	WorkerID      string
	WorkerLeaseID string
	DeviceID      string
	OwnerID       string
	// RequesterID is the fleet requester, without the gw: prefix the
	// worker saw.
	RequesterID string
	// ChosenID is the lease id the requester chose ("" for none), unique
	// within OwnerID only.
	ChosenID  string
	RequestID string
	GrantedAt int64
	// Platform is the lease's platform: a gateway that starts again counts
	// the end of a lease granted before it by it ("" in a record written
	// before grants carried it).
	Platform contract.Platform
}

// Check refuses what no backend can store faithfully: a row without an id,
// and JSON that a later read could not decode (SQLite would store it
// happily, and every read that hands it to encoding/json would fail). It
// returns the request records encoded, records[i] the JSON of Requests[i],
// which a backend stores as they are. Every backend checks a Change with
// it before it writes anything.
func (c Change) Check() (records [][]byte, err error) {
	for _, d := range c.Devices {
		if d.ID == "" {
			return nil, errors.New("device with empty id")
		}
		if len(d.DriverData) > 0 && !json.Valid(d.DriverData) {
			return nil, fmt.Errorf("device %s: driver data is not valid JSON", d.ID)
		}
	}
	for _, l := range c.Leases {
		if l.ID == "" {
			return nil, errors.New("lease with empty id")
		}
	}
	records = make([][]byte, len(c.Requests))
	for i, r := range c.Requests {
		if r.ID == "" {
			return nil, errors.New("request with empty id")
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("request %s: %w", r.ID, err)
		}
		records[i] = b
	}
	for _, g := range c.Grants {
		if g.Key == "" || g.WorkerID == "" || g.WorkerLeaseID == "" {
			return nil, errors.New("grant with an empty key, worker or worker lease")
		}
	}
	for _, e := range c.Events {
		if e.ID == "" {
			return nil, errors.New("event with empty id")
		}
		if len(e.Payload) > 0 && !json.Valid(e.Payload) {
			return nil, fmt.Errorf("event %s: payload is not valid JSON", e.ID)
		}
	}
	return records, nil
}

// Package memstore is a store backend in memory: the records of package
// store kept in maps, with the guarantees the package documentation asks of
// every backend (a Change commits whole or not at all, the last version of
// a row wins, seqs only increase, commits are serial). Nothing survives the
// process; tests use it where they would otherwise write a fake of their
// own, and a second engine may start from it as from a database after a
// crash. internal/store/storetest holds the suite it and the SQLite
// backend both pass.
//
// A Store is safe for concurrent use. What it returns is a copy: a caller
// may change it without changing what is stored.
package memstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// defaultLimit is what a limit <= 0 means, as in the SQLite backend.
const defaultLimit = 1000

// Store is the in-memory backend. The zero value is not usable: call New.
type Store struct {
	// lock is the write lock, held by one commit or reservation at a time;
	// a channel so that Reserve can give up when its context ends.
	lock chan struct{}
	// mu guards the fields below; taken for reads and, under lock, for
	// the short time a commit applies.
	mu       sync.Mutex
	devices  map[string]store.Device
	leases   map[string]store.Lease // by UniqueKey
	requests map[string]storedRequest
	events   []contract.Event
	lastSeq  int64
	nextRow  int64
	fleetID  string
	clock    *store.Clock
	workers  map[string]store.Worker
	grants   map[string]store.Grant
	jobs     map[string][]byte // a job's record as JSON, as the SQLite backend keeps it
}

// storedRequest is a request record as JSON and the order of its first
// write (SQLite's rowid).
type storedRequest struct {
	record []byte
	row    int64
}

// New returns an empty Store.
func New() *Store {
	return &Store{
		lock:     make(chan struct{}, 1),
		devices:  map[string]store.Device{},
		leases:   map[string]store.Lease{},
		requests: map[string]storedRequest{},
		workers:  map[string]store.Worker{},
		grants:   map[string]store.Grant{},
		jobs:     map[string][]byte{},
	}
}

func (s *Store) enter() { s.mu.Lock() }
func (s *Store) leave() { s.mu.Unlock() }

// errNotStored is a Change.Before naming a row the store does not hold.
var errNotStored = errors.New("not stored, though the change says it is")

// Commit writes c whole, or nothing of it when it returns an error, and
// returns its events with their seqs. An empty Change is a no-op returning
// nil, nil.
func (s *Store) Commit(ctx context.Context, c store.Change) ([]contract.Event, error) {
	if c.Empty() {
		return nil, nil
	}
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("memstore: commit: %w", ctx.Err())
	}
	defer func() { <-s.lock }()
	return s.apply(c)
}

// Reserve takes the write lock for one decision, waiting for another
// commit or reservation until ctx ends.
func (s *Store) Reserve(ctx context.Context) (store.Reservation, error) {
	select {
	case s.lock <- struct{}{}:
		return &reservation{s: s}, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("memstore: reserve the write lock: %w", ctx.Err())
	}
}

type reservation struct {
	s    *Store
	done bool
}

func (r *reservation) Commit(_ context.Context, c store.Change) ([]contract.Event, error) {
	if r.done {
		return nil, errors.New("memstore: commit of a reservation already used")
	}
	r.done = true
	defer func() { <-r.s.lock }()
	if c.Empty() {
		return nil, nil
	}
	return r.s.apply(c)
}

func (r *reservation) Release() {
	if !r.done {
		r.done = true
		<-r.s.lock
	}
}

// apply checks c, then writes it; the caller holds the write lock.
func (s *Store) apply(c store.Change) ([]contract.Event, error) {
	records, err := c.Check()
	if err != nil {
		return nil, fmt.Errorf("memstore: commit: %w", err)
	}
	s.enter()
	defer s.leave()
	// A row the change says is stored, and changes, must be: the SQLite
	// backend writes it as an update, which finds no row. (One it does
	// not change is not written at all, so not checked.)
	for _, d := range c.Devices {
		if was, ok := c.Before.Devices[d.ID]; ok && !reflect.DeepEqual(was, d) {
			if _, stored := s.devices[d.ID]; !stored {
				return nil, fmt.Errorf("memstore: commit: device %s: %w", d.ID, errNotStored)
			}
		}
	}
	for _, l := range c.Leases {
		if was, ok := c.Before.Leases[l.UniqueKey()]; ok && was != l {
			if _, stored := s.leases[l.UniqueKey()]; !stored {
				return nil, fmt.Errorf("memstore: commit: lease %s: %w", l.UniqueKey(), errNotStored)
			}
		}
	}
	for _, d := range c.Devices {
		d.DriverData = cloneJSON(d.DriverData)
		s.devices[d.ID] = d
	}
	for _, l := range c.Leases {
		s.leases[l.UniqueKey()] = l
	}
	for i, r := range c.Requests {
		row := s.nextRow
		if was, ok := s.requests[r.ID]; ok {
			row = was.row
		} else {
			s.nextRow++
		}
		s.requests[r.ID] = storedRequest{record: records[i], row: row}
	}
	if c.Clock != nil {
		clk := *c.Clock
		s.clock = &clk
	}
	for _, g := range c.Grants {
		s.grants[g.Key] = g
	}
	for _, k := range c.EndedGrants {
		delete(s.grants, k)
	}
	var out []contract.Event
	for _, e := range c.Events {
		s.lastSeq++
		ev := contract.Event{ID: e.ID, Seq: s.lastSeq, Timestamp: e.Timestamp, Event: e.Event, Payload: cloneJSON(e.Payload)}
		s.events = append(s.events, ev)
		out = append(out, cloneEvent(ev))
	}
	return out, nil
}

// cloneJSON copies a document; an empty one reads back as nil, as a NULL
// column does.
func cloneJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(bytes.Clone(b))
}

func cloneEvent(e contract.Event) contract.Event {
	e.Payload = cloneJSON(e.Payload)
	return e
}

func decodeRequest(b []byte) (contract.LeaseRequestRecord, error) {
	var r contract.LeaseRequestRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return contract.LeaseRequestRecord{}, fmt.Errorf("memstore: request: %w", err)
	}
	return r, nil
}

// Load reads what a starting daemon loads: the devices not deleted, the
// active leases and the open requests, in the SQLite backend's order.
func (s *Store) Load(context.Context) (store.Snapshot, error) {
	s.enter()
	defer s.leave()
	var snap store.Snapshot
	for _, d := range s.devices {
		if d.State != contract.DeviceDeleted {
			d.DriverData = cloneJSON(d.DriverData)
			snap.Devices = append(snap.Devices, d)
		}
	}
	slices.SortFunc(snap.Devices, func(a, b store.Device) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	for _, l := range s.leases {
		if l.EndedAt == 0 {
			snap.Leases = append(snap.Leases, l)
		}
	}
	slices.SortFunc(snap.Leases, func(a, b store.Lease) int {
		return cmp.Or(cmp.Compare(a.GrantedAt, b.GrantedAt), cmp.Compare(a.ID, b.ID))
	})
	var rows []storedRequest
	for _, r := range s.requests {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b storedRequest) int { return cmp.Compare(a.row, b.row) })
	type open struct {
		rec contract.LeaseRequestRecord
		row int64
	}
	var opens []open
	for _, row := range rows {
		r, err := decodeRequest(row.record)
		if err != nil {
			return store.Snapshot{}, err
		}
		if !r.State.Terminal() {
			opens = append(opens, open{r, row.row})
		}
	}
	slices.SortStableFunc(opens, func(a, b open) int { return cmp.Compare(a.rec.CreatedAt, b.rec.CreatedAt) })
	for _, o := range opens {
		snap.Requests = append(snap.Requests, o.rec)
	}
	return snap, nil
}

// Device is the stored device with id, whether deleted or not.
func (s *Store) Device(id string) (store.Device, bool) {
	s.enter()
	defer s.leave()
	d, ok := s.devices[id]
	d.DriverData = cloneJSON(d.DriverData)
	return d, ok
}

// Lease is the stored lease with the unique key key, ended or not.
func (s *Store) Lease(key string) (store.Lease, bool) {
	s.enter()
	defer s.leave()
	l, ok := s.leases[key]
	return l, ok
}

// Request returns the request with id, and whether there is one.
func (s *Store) Request(_ context.Context, id string) (contract.LeaseRequestRecord, bool, error) {
	s.enter()
	defer s.leave()
	row, ok := s.requests[id]
	if !ok {
		return contract.LeaseRequestRecord{}, false, nil
	}
	r, err := decodeRequest(row.record)
	return r, err == nil, err
}

// RequestByKey returns the request requesterID made with idempotency key
// key. An empty key matches nothing.
func (s *Store) RequestByKey(_ context.Context, requesterID, key string) (contract.LeaseRequestRecord, bool, error) {
	if key == "" {
		return contract.LeaseRequestRecord{}, false, nil
	}
	all, err := s.allRequests()
	if err != nil {
		return contract.LeaseRequestRecord{}, false, err
	}
	for _, r := range all {
		if r.RequesterID == requesterID && r.IdempotencyKey == key {
			return r, true, nil
		}
	}
	return contract.LeaseRequestRecord{}, false, nil
}

// Requests returns up to limit requests, newest first; limit <= 0 means
// 1000.
func (s *Store) Requests(_ context.Context, limit int) ([]contract.LeaseRequestRecord, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	all, err := s.allRequests()
	if err != nil {
		return nil, err
	}
	slices.Reverse(all) // newest row first, among equal creation times
	slices.SortStableFunc(all, func(a, b contract.LeaseRequestRecord) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
	if len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// allRequests is every request, in the order of their first write.
func (s *Store) allRequests() ([]contract.LeaseRequestRecord, error) {
	s.enter()
	rows := make([]storedRequest, 0, len(s.requests))
	for _, r := range s.requests {
		rows = append(rows, r)
	}
	s.leave()
	slices.SortFunc(rows, func(a, b storedRequest) int { return cmp.Compare(a.row, b.row) })
	out := make([]contract.LeaseRequestRecord, 0, len(rows))
	for _, row := range rows {
		r, err := decodeRequest(row.record)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Events returns events oldest first: with SinceTs or AfterSeq set, the
// oldest Limit that match; with neither, the newest Limit.
func (s *Store) Events(_ context.Context, q store.EventQuery) ([]contract.Event, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	s.enter()
	defer s.leave()
	var out []contract.Event
	if q.SinceTs <= 0 && q.AfterSeq <= 0 {
		from := max(0, len(s.events)-limit)
		for _, e := range s.events[from:] {
			out = append(out, cloneEvent(e))
		}
		return out, nil
	}
	for _, e := range s.events {
		if len(out) == limit {
			break
		}
		if (q.SinceTs > 0 && e.Timestamp < q.SinceTs) || (q.AfterSeq > 0 && e.Seq <= q.AfterSeq) {
			continue
		}
		out = append(out, cloneEvent(e))
	}
	return out, nil
}

// LastSeq is the highest seq ever given, 0 before the first event.
func (s *Store) LastSeq(context.Context) (int64, error) {
	s.enter()
	defer s.leave()
	return s.lastSeq, nil
}

// Clock is the stored clock reading, if one was written.
func (s *Store) Clock(context.Context) (store.Clock, bool, error) {
	s.enter()
	defer s.leave()
	if s.clock == nil {
		return store.Clock{}, false, nil
	}
	return *s.clock, true, nil
}

// PutClock replaces the stored clock reading.
func (s *Store) PutClock(_ context.Context, c store.Clock) error {
	s.enter()
	defer s.leave()
	s.clock = &c
	return nil
}

// Workers lists a gateway's worker records, by id.
func (s *Store) Workers(context.Context) ([]store.Worker, error) {
	s.enter()
	defer s.leave()
	var out []store.Worker
	for _, w := range s.workers {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b store.Worker) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// PutWorker writes a worker record.
func (s *Store) PutWorker(_ context.Context, w store.Worker) error {
	s.enter()
	defer s.leave()
	s.workers[w.ID] = w
	return nil
}

// DeleteWorker forgets a worker record; forgetting one not stored is no
// error.
func (s *Store) DeleteWorker(_ context.Context, id string) error {
	s.enter()
	defer s.leave()
	delete(s.workers, id)
	return nil
}

// Grants lists a gateway's grant records, oldest first.
func (s *Store) Grants(context.Context) ([]store.Grant, error) {
	s.enter()
	defer s.leave()
	var out []store.Grant
	for _, g := range s.grants {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b store.Grant) int {
		return cmp.Or(cmp.Compare(a.GrantedAt, b.GrantedAt), cmp.Compare(a.Key, b.Key))
	})
	return out, nil
}

// PutJob writes a job's record whole, made or replaced.
func (s *Store) PutJob(_ context.Context, j contract.Job) error {
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("memstore: put job %s: %w", j.ID, err)
	}
	s.enter()
	defer s.leave()
	s.jobs[j.ID] = b
	return nil
}

// Job reads one job's record.
func (s *Store) Job(_ context.Context, id string) (contract.Job, bool, error) {
	s.enter()
	b, ok := s.jobs[id]
	s.leave()
	if !ok {
		return contract.Job{}, false, nil
	}
	var j contract.Job
	if err := json.Unmarshal(b, &j); err != nil {
		return contract.Job{}, false, fmt.Errorf("memstore: job %s: %w", id, err)
	}
	return j, true, nil
}

// Jobs reads the newest limit jobs in state ("" is any), newest first.
func (s *Store) Jobs(_ context.Context, state string, limit int) ([]contract.Job, error) {
	s.enter()
	all := make([]contract.Job, 0, len(s.jobs))
	var err error
	for id, b := range s.jobs {
		var j contract.Job
		if e := json.Unmarshal(b, &j); e != nil {
			err = fmt.Errorf("memstore: job %s: %w", id, e)
			break
		}
		all = append(all, j)
	}
	s.leave()
	if err != nil {
		return nil, err
	}
	out := []contract.Job{}
	for _, j := range all {
		if state == "" || j.State == state {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b contract.Job) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	if limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DeleteJobsBefore deletes the jobs that ended before ts (unix ms) and
// reports how many.
func (s *Store) DeleteJobsBefore(_ context.Context, ts int64) (int, error) {
	s.enter()
	defer s.leave()
	n := 0
	for id, b := range s.jobs {
		var j contract.Job
		if err := json.Unmarshal(b, &j); err != nil {
			return n, fmt.Errorf("memstore: job %s: %w", id, err)
		}
		if j.EndedAt > 0 && j.EndedAt < ts {
			delete(s.jobs, id)
			n++
		}
	}
	return n, nil
}

// FleetID is the first id proposed, whatever is proposed later.
func (s *Store) FleetID(_ context.Context, proposed string) (string, error) {
	s.enter()
	defer s.leave()
	if s.fleetID == "" {
		s.fleetID = proposed
	}
	return s.fleetID, nil
}

package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/url"
	"path/filepath"
	"time"

	"github.com/simlock/simlock/internal/contract"
	_ "modernc.org/sqlite" // the driver the daemon's store uses
)

// check reads the daemon's state and holds it against what was
// acknowledged; it returns what does not hold. It runs while the agents go
// on, so whatever they were told after it read the ledger is not asked of
// the daemon.
func check(ctx context.Context, h *home, l *ledger) []string {
	var bad []string
	fail := func(check, format string, args ...any) { bad = append(bad, named(check, format, args...)) }
	c, err := h.dial(ctx, "chaos-checker", true)
	if err != nil {
		return []string{named("checker", "dial: %v", err)}
	}
	defer c.Close()

	before := l.snapshot()
	active, err := c.Leases(ctx)
	if err != nil {
		return []string{named("checker", "lease.list: %v", err)}
	}
	byID := map[string]contract.LeaseRecord{}
	byDevice := map[string]string{}
	for _, rec := range active {
		byID[rec.ID] = rec
		if other, ok := byDevice[rec.DeviceID]; ok {
			fail(checkDeviceTwice, "device %s is in two active leases, %s and %s", rec.DeviceID, other, rec.ID)
		}
		byDevice[rec.DeviceID] = rec.ID
	}
	now := time.Now().UnixMilli()
	for id, hd := range before {
		_, isActive := byID[id]
		switch {
		case hd.released && isActive:
			fail(checkLeaseLost, "lease %s of %s was released (acknowledged) and is active again", id, hd.agent)
		case !hd.releasing && !isActive && hd.deadline > now+5000:
			if cur := l.current(id); !cur.releasing {
				fail(checkLeaseLost, "acknowledged lease %s of %s (device %s) is missing", id, hd.agent, hd.device)
			}
		case isActive && byID[id].DeviceID != hd.device:
			fail(checkLeaseLost, "lease %s was granted on device %s and is now on %s", id, hd.device, byID[id].DeviceID)
		}
	}

	bad = append(bad, checkRequests(ctx, h, c)...)
	bad = append(bad, checkEvents(ctx, c, before)...)
	return bad
}

// checkRequests finds a request stored as open that the daemon does not
// hold open: neither open nor settled.
func checkRequests(ctx context.Context, h *home, c interface {
	List(context.Context, contract.ListKind) (contract.ListGetResult, error)
	Call(context.Context, contract.Op, any, any) error
}) []string {
	q := url.Values{}
	q.Add("mode", "ro")
	q.Add("_pragma", "busy_timeout(5000)")
	db, err := sql.Open("sqlite", "file:"+filepath.Join(h.Dir, "simlock.db")+"?"+q.Encode())
	if err != nil {
		return []string{named("checker", "open the database: %v", err)}
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT id FROM lease_requests WHERE state NOT IN ('granted', 'failed', 'cancelled')`)
	if err != nil {
		return []string{named("checker", "read requests: %v", err)}
	}
	var stored []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return []string{named("checker", "read requests: %v", err)}
		}
		stored = append(stored, id)
	}
	rows.Close()
	open, err := c.List(ctx, contract.ListRequests)
	if err != nil {
		return []string{named("checker", "list.get requests: %v", err)}
	}
	held := map[string]bool{}
	for _, r := range open.Requests {
		held[r.ID] = true
	}
	var bad []string
	for _, id := range stored {
		if held[id] {
			continue
		}
		// Settled since the database was read, or stranded.
		var st contract.LeaseRequestStatus
		if err := c.Call(ctx, contract.OpLeaseRequestGet, contract.LeaseRequestGetInput{RequestID: id}, &st); err != nil {
			bad = append(bad, named(checkRecords, "request %s is stored open and lease-request.get answers %v", id, err))
		} else if !st.Request.State.Terminal() {
			bad = append(bad, named(checkRecords, "request %s is stored %s but the daemon does not hold it open: neither open nor settled", id, st.Request.State))
		}
	}
	return bad
}

// checkEvents reads the whole event log: seqs increase, ids are unique, a
// lease is granted once and ends at most once, and every acknowledged grant
// and release has its event.
func checkEvents(ctx context.Context, c interface {
	Replay(context.Context, contract.EventsReplayInput) ([]contract.Event, error)
}, before map[string]held) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, named(checkRecords, format, args...)) }
	granted, ended := map[string]int{}, map[string]int{}
	ids := map[string]bool{}
	var last int64
	in := contract.EventsReplayInput{SinceTs: 1, Limit: 10000}
	for {
		evs, err := c.Replay(ctx, in)
		if err != nil {
			return append(bad, named("checker", "events.replay: %v", err))
		}
		for _, ev := range evs {
			if ev.Seq <= last {
				fail("event %s has seq %d after seq %d", ev.ID, ev.Seq, last)
			}
			last = ev.Seq
			if ids[ev.ID] {
				fail("event id %s appears twice", ev.ID)
			}
			ids[ev.ID] = true
			var p struct {
				LeaseID string `json:"leaseId"`
			}
			_ = json.Unmarshal(ev.Payload, &p)
			switch ev.Event {
			case "lease.granted":
				granted[p.LeaseID]++
			case "lease.released", "lease.expired":
				ended[p.LeaseID]++
			}
		}
		if len(evs) < in.Limit {
			break
		}
		in = contract.EventsReplayInput{AfterSeq: last, Limit: 10000}
	}
	for id, n := range granted {
		if n > 1 {
			fail("lease %s has %d lease.granted events", id, n)
		}
	}
	for id, n := range ended {
		if n > 1 {
			fail("lease %s has %d end events", id, n)
		}
	}
	for id, hd := range before {
		if granted[id] != 1 {
			fail("acknowledged lease %s has %d lease.granted events, want 1", id, granted[id])
		}
		if hd.released && ended[id] != 1 {
			fail("acknowledged release of %s has %d end events, want 1", id, ended[id])
		}
	}
	return bad
}

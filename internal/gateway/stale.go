package gateway

import (
	"encoding/json"
	"hash/fnv"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// A worker that refuses a request before any progress (NO_CAPACITY,
// UNKNOWN_MODEL, RUNTIME_MISSING, NO_DRIVER) bounced it: the gateway's
// view of it was stale. The worker is then stale for that class of need
// (the request's needKey, so every waiter asking the same thing skips it
// too) until one of two things:
//
//   - its view changes in what routing reads (viewPrint: catalog,
//     capacity counters, devices, health, drain, TTL cap, download
//     policy), not merely a read of it (each read asks again, and a
//     bounce's own refresh is a read); a change counts from
//     staleBackoffMin after the bounce, so a worker whose view changes at
//     every read is asked at most twice a second;
//   - its backoff ends: staleBackoffMin after the first bounce, doubling
//     with each bounce off an unchanged view up to staleBackoffMax, reset
//     when the view bounced off differs from the last one (a real change).
//
// Timers through the queue kick the line when either may end, so nothing
// polls; a grant of the need by the worker forgets the mark.
const (
	staleBackoffMin = 500 * time.Millisecond
	staleBackoffMax = 30 * time.Second
)

// staleKey names one worker's stale view for one class of need.
type staleKey struct{ worker, need string }

// staleMark is a worker's stale view for a class of need.
type staleMark struct {
	print   uint64    // viewPrint of the view bounced off
	bounces int       // bounces off views with this print, in a row
	at      time.Time // the last bounce
	until   time.Time // the end of its backoff
	timers  [2]*time.Timer
}

// staleBackoff is the backoff after the nth bounce in a row off one view.
func staleBackoff(n int) time.Duration {
	return min(staleBackoffMin<<min(max(n-1, 0), 16), staleBackoffMax)
}

// markStale records that workerID bounced a request of need key when its
// view printed print, and arms the kicks that end the mark. The decision
// lock must be held.
func (l *Leasing) markStale(workerID, key string, print uint64, now time.Time) {
	k := staleKey{workerID, key}
	n := 1
	if m := l.stale[k]; m != nil {
		m.stop()
		if m.print == print {
			n = m.bounces + 1
		}
	}
	m := &staleMark{print: print, bounces: n, at: now, until: now.Add(staleBackoff(n))}
	kick := func() {
		if l.q.Stopping() {
			return // nothing is served any more: no decision to commit
		}
		_ = l.q.Do(func(tx *queue.Txn) error { tx.Kick(); return nil })
	}
	m.timers[0] = time.AfterFunc(m.until.Sub(now), kick)
	if n > 1 {
		// A real change within the backoff is tried from here (and
		// ends the reserve staleFor makes meanwhile).
		m.timers[1] = time.AfterFunc(staleBackoffMin, kick)
	}
	l.stale[k] = m
}

func (m *staleMark) stop() {
	for _, t := range m.timers {
		if t != nil {
			t.Stop()
		}
	}
}

// staleFor reports whether routing skips workerID, whose view's viewPrint
// is print(), for need key now, and whether it is to be kept from later waiters in this pass (reserve): its view
// changed since the bounce, so the room the waiter needs may have freed,
// but too soon after the bounce to ask again. A later waiter of another
// class of need must not take that room first; it waits at most until
// staleBackoffMin after the bounce, when a timer kicks the line. The
// decision lock must be held.
func (l *Leasing) staleFor(workerID string, print func() uint64, key string, now time.Time) (skip, reserve bool) {
	m := l.stale[staleKey{workerID, key}]
	if m == nil || !now.Before(m.until) {
		return false, false
	}
	if print() == m.print {
		return true, false
	}
	if now.Sub(m.at) >= staleBackoffMin {
		return false, false
	}
	return true, true
}

// forgetStale drops the marks that matter no more: the worker's for key
// (it granted one), every one of a worker (key "": it was forgotten), and
// those whose backoff ended long enough ago that no waiter came back for
// them. The decision lock must be held.
func (l *Leasing) forgetStale(workerID, key string, now time.Time) {
	for k, m := range l.stale {
		if (k.worker == workerID && (key == "" || k.need == key)) || now.Sub(m.until) > staleBackoffMax {
			m.stop()
			delete(l.stale, k)
		}
	}
}

// viewPrint is a fingerprint of what routing reads of a worker's view:
// equal prints, the same routing. A read that changed nothing of it (the
// time it was read, a lease's renewal, an install's progress) leaves it
// as it was.
func viewPrint(v *contract.WorkerView) uint64 {
	type dev struct {
		ID      string
		State   contract.DeviceState
		LeaseID string
		Spec    contract.DeviceSpec
	}
	devs := make([]dev, 0, len(v.Devices))
	for _, d := range v.Devices {
		devs = append(devs, dev{d.ID, d.State, d.LeaseID, d.Spec})
	}
	h := fnv.New64a()
	_ = json.NewEncoder(h).Encode(struct {
		Connection     contract.WorkerConnection
		Drained        bool
		Health         string
		MaxTTLMs       int64
		DownloadPolicy string
		Catalog        []contract.Catalog
		Capacity       *contract.Capacity
		Devices        []dev
	}{v.Connection, v.Drained, v.Health, v.MaxTTLMs, v.DownloadPolicy, v.Catalog, v.Capacity, devs})
	return h.Sum64()
}

// needKey is a request's class of need: what it asks for (platform, model
// or class, OS version, mode, image tag), as routing reads it. Waiters of
// equal keys are served in arrival order (queue.ScopeNeed); a model is
// named ignoring case, as the worker matches it.
func needKey(a Ask) string {
	model, class := strings.ToLower(a.Model), a.Class
	if model == "" && class == "" {
		class = contract.ClassPhone
	}
	if model != "" {
		class = ""
	}
	return strings.Join([]string{string(a.Platform), model, string(class), a.OS.Raw, string(a.Mode), a.ImageTag}, "\x00")
}

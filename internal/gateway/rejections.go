package gateway

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Refused uplinks are recorded as worker.rejected, bounded three ways, so
// that any number of refused dials, whatever worker ids they invent, write
// a bounded number of events and keep a bounded amount of memory:
//
//   - one event per rejectionEvery for one remote address and code: the
//     refusals between are counted and carried by the next one. The key is
//     what the gateway saw (the address) and what it said (the code), never
//     the worker id the caller chose, nor the message that may name it;
//   - at most maxRejectionKeys addresses are told apart: past them, the
//     others are counted under one key, otherAddresses;
//   - at most rejectionBurst events in all per rejectionEvery: past them a
//     refusal is counted, and told with the next event of its key.
const (
	// rejectionEvery is how often worker.rejected is recorded for one
	// address and code: a worker retrying with a bad token every few
	// seconds would otherwise fill the log.
	rejectionEvery   = time.Minute
	maxRejectionKeys = 256
	rejectionBurst   = 30
	otherAddresses   = "(other addresses)"
)

type rejectionKey struct {
	remote string
	code   contract.Code
}

// rejection is one key's refusals since its last event.
type rejection struct {
	last  time.Time
	count int
	// told is whether an event was recorded for the key yet.
	told bool
}

// rejections are the refused uplinks being coalesced. The fleet's lock
// guards them.
type rejections struct {
	byKey map[rejectionKey]*rejection
	// window and inWindow count the events of the current rejectionEvery,
	// for rejectionBurst.
	window   time.Time
	inWindow int
}

// Rejected notes an uplink refused before it was served, with the code
// and message it was refused with, the worker id it claimed ("" when not a
// valid id) and the remote address: recorded as worker.rejected within the
// bounds above.
func (f *Fleet) Rejected(now time.Time, code contract.Code, reason, workerID, remote string) {
	f.mu.Lock()
	rs := &f.rejected
	if rs.byKey == nil {
		rs.byKey = map[rejectionKey]*rejection{}
	}
	k := rejectionKey{remote, code}
	r, ok := rs.byKey[k]
	if !ok {
		// Forget keys that fell silent, so a scan of addresses cannot
		// grow the map without bound; past the bound, the rest share one.
		if len(rs.byKey) >= maxRejectionKeys {
			for key, old := range rs.byKey {
				if now.Sub(old.last) > 10*rejectionEvery {
					delete(rs.byKey, key)
				}
			}
		}
		if len(rs.byKey) >= maxRejectionKeys {
			k.remote = otherAddresses
			r = rs.byKey[k]
		}
		if r == nil {
			r = &rejection{}
			rs.byKey[k] = r
		}
	}
	r.count++
	if r.told && now.Sub(r.last) < rejectionEvery {
		f.mu.Unlock()
		return
	}
	if now.Sub(rs.window) >= rejectionEvery {
		rs.window, rs.inWindow = now, 0
	}
	if rs.inWindow >= rejectionBurst {
		f.mu.Unlock()
		return
	}
	rs.inWindow++
	count := r.count
	r.last, r.count, r.told = now, 0, true
	f.mu.Unlock()
	p := map[string]any{"status": code.HTTPStatus(), "code": code, "reason": reason, "remote": k.remote, "attempts": count}
	if workerID != "" {
		p["workerId"] = workerID
	}
	f.emit(contract.EvWorkerRejected, p)
}

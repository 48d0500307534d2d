package gateway

import (
	"time"
)

// rejectionEvery is how often worker.rejected is recorded for one refused
// caller: a worker retrying with a bad token every few seconds would
// otherwise fill the log.
const rejectionEvery = time.Minute

// rejection is one refused caller's count since its last event.
type rejection struct {
	last  time.Time
	count int
}

// Rejected notes an uplink refused before it was served (401 or 403),
// keyed by what was refused: the first of a kind is recorded at once, the
// repeats within rejectionEvery are counted and carried by the next one.
func (f *Fleet) Rejected(now time.Time, status int, reason, workerID, remote string) {
	key := reason + "\x00" + workerID + "\x00" + remote
	f.mu.Lock()
	r, ok := f.rejected[key]
	if !ok {
		r = &rejection{}
		f.rejected[key] = r
	}
	r.count++
	if ok && now.Sub(r.last) < rejectionEvery {
		f.mu.Unlock()
		return
	}
	count := r.count
	r.last, r.count = now, 0
	// Forget keys that fell silent, so a scan of random ids cannot grow
	// the map without bound.
	for k, old := range f.rejected {
		if now.Sub(old.last) > 10*rejectionEvery {
			delete(f.rejected, k)
		}
	}
	f.mu.Unlock()
	p := map[string]any{"status": status, "reason": reason, "remote": remote, "attempts": count}
	if workerID != "" {
		p["workerId"] = workerID
	}
	f.emit("worker.rejected", p)
}

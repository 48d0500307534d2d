package gateway

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// findingKind is a kind of claim the gateway refused of a worker.
type findingKind int

const (
	findingUngranted findingKind = iota
	findingDoubleGrant
	findingEventRefused
	findingEventDropped
)

func (k findingKind) String() string {
	switch k {
	case findingUngranted:
		return "ungranted-lease"
	case findingDoubleGrant:
		return "double-grant"
	case findingEventRefused:
		return "event-refused"
	}
	return "event-dropped"
}

// findingLogEvery bounds the warn lines of one kind of finding of one
// worker: a worker that repeats a lie at every snapshot, or floods events,
// fills no log. The lines between are counted, and the next line says how
// many were left out.
const findingLogEvery = time.Minute

// findingLog is when a kind of finding of one worker was last logged, and
// how many were not logged since.
type findingLog struct {
	at      time.Time
	skipped int64
}

// found counts n findings of kind on workerID's view, what being the
// latest, and logs it, at most once a findingLogEvery per kind. A worker
// the gateway does not know (removed meanwhile) is only logged.
func (f *Fleet) found(workerID string, kind findingKind, n int64, what string) {
	now := time.Now()
	f.mu.Lock()
	w, ok := f.workers[workerID]
	logIt, skipped := true, int64(0)
	if ok {
		// A new value each time: copies of the view handed out share the
		// old one, which they read outside the lock.
		fs := &contract.WorkerFindings{}
		if w.view.Findings != nil {
			*fs = *w.view.Findings
		}
		w.view.Findings = fs
		switch kind {
		case findingUngranted:
			fs.UngrantedLeases += n
		case findingDoubleGrant:
			fs.DoubleGrants += n
		case findingEventRefused:
			fs.EventsRefused += n
		default:
			fs.EventsDropped += n
		}
		fs.Last, fs.LastAt = kind.String()+": "+what, now.UnixMilli()
		if w.logged == nil {
			w.logged = map[findingKind]*findingLog{}
		}
		l := w.logged[kind]
		switch {
		case l == nil:
			w.logged[kind] = &findingLog{at: now}
		case now.Sub(l.at) < findingLogEvery:
			l.skipped += n
			logIt = false
		default:
			skipped = l.skipped
			l.at, l.skipped = now, 0
		}
	}
	f.mu.Unlock()
	if logIt {
		f.log.Warn("a worker's claim was not believed", "workerId", workerID, "finding", kind.String(), "count", n, "claim", what,
			"notLoggedSince", skipped)
	}
}

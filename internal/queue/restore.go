package queue

import (
	"context"
	"slices"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Restore puts back the open requests a previous queue over the same store
// left (a gateway that restarted, or a replica that took over from a
// leader that died): each is open again under its id, with its idempotency
// key, requester and chosen lease id, as a request made as a resource (it
// waits whether or not anyone follows it), resolved again by resolve, and
// back in line at the place its stored arrival gives it with its original
// deadline. Time spent while no queue held it counts: one already past its
// deadline fails with QUEUE_TIMEOUT at once. Records that never joined a
// line (arrival 0) come after those that did, oldest first, as newcomers.
// A request being started or downloading when the previous queue stopped
// waits in line again. Settled records, and requests open here already,
// are left alone. It is one decision: one commit.
//
// resolve runs before the decision, outside the lock, once per record.
func (q *Queue) Restore(ctx context.Context, recs []contract.LeaseRequestRecord, resolve func(context.Context, contract.LeaseRequestRecord) Resolution) error {
	open := make([]contract.LeaseRequestRecord, 0, len(recs))
	for _, r := range recs {
		if !r.State.Terminal() {
			open = append(open, r)
		}
	}
	if len(open) == 0 {
		return nil
	}
	slices.SortStableFunc(open, restoreOrder)
	res := make([]Resolution, len(open))
	for i, r := range open {
		res[i] = resolve(ctx, r)
	}
	return q.Do(func(tx *Txn) error {
		if q.stopping {
			return contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping")
		}
		for _, r := range open {
			q.seq = max(q.seq, r.Arrival)
		}
		for i, r := range open {
			if q.open[r.ID] != nil || q.byRequester[r.RequesterID] != nil {
				continue
			}
			q.restoreLocked(tx, r, res[i])
		}
		return nil
	})
}

// restoreOrder is the order open records go back in line: by arrival,
// those that never had one after, by when they were made.
func restoreOrder(a, b contract.LeaseRequestRecord) int {
	switch {
	case a.Arrival != 0 && b.Arrival != 0:
		return compare(a.Arrival, b.Arrival)
	case a.Arrival != 0:
		return -1
	case b.Arrival != 0:
		return 1
	}
	if c := compare(a.CreatedAt, b.CreatedAt); c != 0 {
		return c
	}
	return compare(a.ID, b.ID)
}

func compare[T int64 | uint64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// restoreLocked opens one stored request again and acts on its resolution.
func (q *Queue) restoreLocked(tx *Txn, rec contract.LeaseRequestRecord, res Resolution) {
	rec.State, rec.Stage, rec.QueuePosition = contract.RequestQueued, "", 0
	w := &Waiter{
		rec:      rec,
		platform: rec.Spec.Platform,
		phase:    phaseOut,
		detached: true,
		done:     make(chan struct{}),
	}
	back := rec.Arrival != 0
	if back {
		w.seq = rec.Arrival
		if rec.DeadlineAt > 0 {
			w.deadline = time.UnixMilli(rec.DeadlineAt)
		}
	}
	q.openLocked(w)
	tx.write(w)
	q.actLocked(tx, w, res, back)
}

package queue

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// successor is a queue over st that takes over from the one before it, with
// a byNeed placer (the class of need is the request's model, "plain" for
// none).
func successor(t *testing.T, st *memStore) (*Queue, *byNeed) {
	t.Helper()
	pl := &byNeed{free: map[string]int{}, held: map[string]bool{}, asked: map[string]int{}}
	q := New(Options{Store: st, Placer: pl, LeaseOf: func(string) (string, string, bool) { return "", "", false }})
	return q, pl
}

func keyOf(s contract.RequestSpec) keyed {
	k := s.Model
	if k == "" {
		k = "plain"
	}
	return keyed{p: s.Platform, key: k}
}

// restore puts back every open record of st into q.
func restore(t *testing.T, q *Queue, st *memStore) {
	t.Helper()
	recs := st.all()
	slices.Reverse(recs) // the order they come in is no matter
	err := q.Restore(context.Background(), recs, func(_ context.Context, r contract.LeaseRequestRecord) Resolution {
		return Resolution{Need: keyOf(r.Spec)}
	})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
}

// submitTo submits requester's request for spec to q as a resource (no
// one follows it), resolved as successor's placer reads it.
func submitTo(t *testing.T, q *Queue, requester string, in contract.LeaseRequestInput) *Ticket {
	t.Helper()
	in.RequesterID = requester
	tk, err := q.Submit(context.Background(), Ask{Caller: Caller{Principal: requester}, Input: in, TTLMs: 60_000},
		func(context.Context) Resolution { return Resolution{Need: keyOf(in.Spec())} })
	if err != nil {
		t.Fatalf("submit %s: %v", requester, err)
	}
	return tk
}

// A request's arrival and deadline are stored when it first joins the
// line, and a queue that takes over puts the open requests back in that
// order, across platforms and classes of need; one that never joined a
// line comes after, however old.
func TestRestorePutsOpenRequestsBackInTheirArrivalOrder(t *testing.T) {
	st := newMemStore()
	q1, _ := successor(t, st)
	android := contract.LeaseRequestInput{Platform: contract.PlatformAndroid}
	x := contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "x"}
	order := []string{"a", "b", "c", "d", "e"}
	ins := []contract.LeaseRequestInput{x, android, ios, x, android}
	timed := ios
	timed.TimeoutMs = 60_000
	ins[2] = timed
	var start time.Time
	for i, who := range order {
		if i == 2 {
			start = time.Now()
		}
		submitTo(t, q1, who, ins[i])
	}
	for i, r := range openByRequester(st) {
		if r.Arrival != uint64(i+1) {
			t.Errorf("stored arrival of %s = %d, want %d", r.RequesterID, r.Arrival, i+1)
		}
	}
	c := openByRequester(st)[2]
	if c.DeadlineAt < start.Add(60*time.Second).UnixMilli() || c.DeadlineAt > time.Now().Add(60*time.Second).UnixMilli() {
		t.Errorf("stored deadline of c = %d, want its 60 s from its first queueing (%d)", c.DeadlineAt, start.Add(60*time.Second).UnixMilli())
	}
	if openByRequester(st)[0].DeadlineAt != 0 {
		t.Errorf("a request with no timeout stored deadline %d, want 0", openByRequester(st)[0].DeadlineAt)
	}
	q1.Stop()
	// Arrival alone orders them: make the later ones look older.
	var rewrite []contract.LeaseRequestRecord
	for _, r := range st.all() {
		r.CreatedAt = 100 - int64(r.Arrival)
		rewrite = append(rewrite, r)
	}
	if _, err := st.Commit(context.Background(), Writes{Requests: rewrite}); err != nil {
		t.Fatal(err)
	}
	// A record left open that never joined a line, older than them all.
	old := contract.LeaseRequestRecord{ID: "req_old", RequesterID: "z", OwnerID: "z", Spec: contract.RequestSpec{Platform: contract.PlatformIOS},
		State: contract.RequestStarting, CreatedAt: 1, Policy: contract.WaitPolicy{TTLMs: 60_000}}
	if _, err := st.Commit(context.Background(), Writes{Requests: []contract.LeaseRequestRecord{old}}); err != nil {
		t.Fatal(err)
	}

	q2, pl := successor(t, st)
	restore(t, q2, st)
	if got := q2.all.n; got != 6 {
		t.Fatalf("%d requests open after the restore, want 6", got)
	}
	_ = q2.Do(func(tx *Txn) error {
		pl.free["x"], pl.free["plain"] = 2, 4
		tx.Kick()
		return nil
	})
	want := append(slices.Clone(order), "z")
	if !slices.Equal(pl.placed, want) {
		t.Fatalf("granted in the order %v, want the arrival order %v", pl.placed, want)
	}
}

// openByRequester is st's records in the order of their requesters' names.
func openByRequester(st *memStore) []contract.LeaseRequestRecord {
	rs := st.all()
	slices.SortFunc(rs, func(a, b contract.LeaseRequestRecord) int { return compare(a.RequesterID, b.RequesterID) })
	return rs
}

// A restored request keeps its original deadline: the time it waited on
// the previous queue and the time no queue held it both count.
func TestARestoredRequestKeepsItsOriginalDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		q1, _ := successor(t, st)
		in := ios
		in.TimeoutMs = 10_000
		start := time.Now()
		tk := submitTo(t, q1, "a", in)
		time.Sleep(4 * time.Second)
		q1.Stop()
		time.Sleep(3 * time.Second) // no queue holds it meanwhile
		q2, _ := successor(t, st)
		restore(t, q2, st)
		time.Sleep(3*time.Second - time.Millisecond)
		synctest.Wait()
		if got := st.record(tk.RequestID()).State; got != contract.RequestQueued {
			t.Fatalf("1 ms before its deadline the request is %s, want queued", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		r := st.record(tk.RequestID())
		if r.State != contract.RequestFailed || r.Error == nil || r.Error.Code != contract.CodeQueueTimeout {
			t.Fatalf("at its deadline the request is %s (%v), want failed QUEUE_TIMEOUT", r.State, r.Error)
		}
		if got := time.UnixMilli(r.SettledAt).Sub(start); got != 10*time.Second {
			t.Fatalf("timed out %v after it first queued, want its 10 s", got)
		}
	})
}

// A request whose deadline passed while no queue held it fails
// QUEUE_TIMEOUT as it is restored, its record written in the restore's one
// commit.
func TestARequestRestoredPastItsDeadlineTimesOutAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		q1, _ := successor(t, st)
		in := ios
		in.TimeoutMs = 1000
		late := submitTo(t, q1, "a", in)
		kept := submitTo(t, q1, "b", ios)
		q1.Stop()
		time.Sleep(5 * time.Second)
		q2, _ := successor(t, st)
		st.mu.Lock()
		before := st.commits
		st.mu.Unlock()
		restore(t, q2, st)
		st.mu.Lock()
		commits := st.commits - before
		st.mu.Unlock()
		if commits != 1 {
			t.Errorf("the restore took %d commits, want 1", commits)
		}
		r := st.record(late.RequestID())
		if r.State != contract.RequestFailed || r.Error == nil || r.Error.Code != contract.CodeQueueTimeout {
			t.Fatalf("restored past its deadline: %s (%v), want failed QUEUE_TIMEOUT at once", r.State, r.Error)
		}
		if got := st.record(kept.RequestID()).State; got != contract.RequestQueued {
			t.Fatalf("the request with no timeout is %s, want queued", got)
		}
	})
}

// A restored request keeps its id, its idempotency key, its requester and
// the lease id it chose: a repeat with its key follows it, and its
// requester and chosen id are taken as they were.
func TestARestoredRequestIsFollowedByItsKeyAndHoldsItsRequesterAndChosenID(t *testing.T) {
	st := newMemStore()
	q1, _ := successor(t, st)
	in := ios
	in.IdempotencyKey, in.LeaseID = "k", "mine"
	first := submitTo(t, q1, "a", in)
	q1.Stop()
	q2, pl := successor(t, st)
	restore(t, q2, st)

	in.RequesterID = "a"
	again, err := q2.Submit(context.Background(), Ask{Caller: Caller{Principal: "a"}, Input: in, TTLMs: 60_000, Progress: func(contract.LeaseProgress) {}},
		func(context.Context) Resolution { return Resolution{Need: keyOf(in.Spec())} })
	if err != nil || again.RequestID() != first.RequestID() {
		t.Fatalf("a repeat with the key: %v, %v; want to join request %s", again, err, first.RequestID())
	}
	other := ios
	other.RequesterID = "a"
	_, err = q2.Submit(context.Background(), Ask{Caller: Caller{Principal: "a"}, Input: other, TTLMs: 60_000},
		func(context.Context) Resolution { return Resolution{Need: keyOf(other.Spec())} })
	if ce := expectCode(t, "another request of the requester", err, contract.CodeRequesterAlreadyLeased); ce.Details["existingRequestId"] != first.RequestID() {
		t.Fatalf("refused naming %v, want the restored request %s", ce.Details["existingRequestId"], first.RequestID())
	}
	chosen := ios
	chosen.RequesterID, chosen.LeaseID = "a/two", "mine"
	_, err = q2.Submit(context.Background(), Ask{Caller: Caller{Principal: "a"}, Input: chosen, TTLMs: 60_000},
		func(context.Context) Resolution { return Resolution{Need: keyOf(chosen.Spec())} })
	expectCode(t, "the restored request's chosen id", err, contract.CodeLeaseIDTaken)

	_ = q2.Do(func(tx *Txn) error { pl.free["plain"] = 1; tx.Kick(); return nil })
	g, cerr := again.Result()
	if cerr != nil || g.RequestID != first.RequestID() {
		t.Fatalf("the repeat heard %+v, %v; want the restored request's grant", g, cerr)
	}
}

// The revisions of a queue that takes over never equal those its
// predecessor gave: a reader resuming with the last one it saw there hears
// the request as it is now, at once.
func TestARestoredRequestNeverReusesARevisionOfThePreviousQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		q1, _ := successor(t, st)
		tk := submitTo(t, q1, "a", ios)
		c := Caller{Principal: "a"}
		seen, err := q1.Status(context.Background(), c, contract.LeaseRequestGetInput{RequestID: tk.RequestID()})
		if err != nil {
			t.Fatal(err)
		}
		q1.Stop()
		time.Sleep(time.Second)
		q2, _ := successor(t, st)
		restore(t, q2, st)
		start := time.Now()
		st2, err := q2.Status(context.Background(), c, contract.LeaseRequestGetInput{RequestID: tk.RequestID(), AfterRev: seen.Rev, WaitMs: 30_000})
		if err != nil {
			t.Fatal(err)
		}
		if st2.Rev == seen.Rev || time.Since(start) != 0 {
			t.Fatalf("resumed after revision %d: got revision %d after %v; want a new one at once", seen.Rev, st2.Rev, time.Since(start))
		}
		if st2.Request.State != contract.RequestQueued {
			t.Fatalf("the restored request reads %s, want queued", st2.Request.State)
		}
	})
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// gatedRelays is a relay store in memory that counts its commits, holds
// each until told (gate, when set) or its context ends, and fails those
// fail says to.
type gatedRelays struct {
	gate chan struct{}
	fail func(commit int) error

	mu      sync.Mutex
	commits [][]string // the worker ids of each commit's batches
	seq     int64
}

func (s *gatedRelays) RelayBatches(ctx context.Context, bs []store.RelayBatch) ([][]contract.Event, error) {
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ws []string
	for _, b := range bs {
		ws = append(ws, b.WorkerID)
	}
	s.commits = append(s.commits, ws)
	if s.fail != nil {
		if err := s.fail(len(s.commits)); err != nil {
			return nil, err
		}
	}
	out := make([][]contract.Event, len(bs))
	for i, b := range bs {
		for _, ev := range b.Events {
			s.seq++
			ev.Seq = s.seq
			out[i] = append(out[i], ev)
		}
	}
	return out, nil
}

func (s *gatedRelays) commitLog() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.commits...)
}

// published records what a relay group publishes.
type published struct {
	mu  sync.Mutex
	ids []string
}

func (p *published) publish(evs ...contract.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range evs {
		p.ids = append(p.ids, ev.ID)
	}
}

func (p *published) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ids...)
}

func relayBatch(worker string) store.RelayBatch {
	return store.RelayBatch{WorkerID: worker, Events: []contract.Event{{ID: worker + "-e", Seq: 1, Event: contract.EvLeaseReleased}}, LastSeq: 1}
}

// Relays told while one commits share the next commit: 1 + 100 batches
// take 3 commits (1, then 64 and 36), written and published in the order
// told, and no caller returns before the commit that holds its batch.
func TestRelaysToldWhileOneCommitsShareTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gatedRelays{gate: make(chan struct{})}
		pub := &published{}
		g := &relayGroup{store: st, lock: &sync.Mutex{}, publish: pub.publish}
		var mu sync.Mutex
		returned := 0
		errs := map[string]error{}
		tell := func(w string) {
			err := g.relay(t.Context(), relayBatch(w))
			mu.Lock()
			returned++
			errs[w] = err
			mu.Unlock()
		}
		var wg sync.WaitGroup
		var want []string
		for i := range 101 {
			w := fmt.Sprintf("w%03d", i)
			want = append(want, w)
			wg.Go(func() { tell(w) })
			synctest.Wait() // told in this order
		}
		mu.Lock()
		n := returned
		mu.Unlock()
		if n != 0 {
			t.Fatalf("%d callers returned before the first commit ended, want none", n)
		}
		close(st.gate)
		wg.Wait()
		commits := st.commitLog()
		var sizes []int
		var order []string
		for _, c := range commits {
			sizes = append(sizes, len(c))
			order = append(order, c...)
		}
		if !reflect.DeepEqual(sizes, []int{1, 64, 36}) {
			t.Errorf("101 relays took commits of %v batches, want [1 64 36]", sizes)
		}
		if !reflect.DeepEqual(order, want) {
			t.Errorf("the batches were committed in the order %v, want the order told", order)
		}
		var wantIDs []string
		for _, w := range want {
			wantIDs = append(wantIDs, w+"-e")
		}
		if got := pub.got(); !reflect.DeepEqual(got, wantIDs) {
			t.Errorf("published %v, want every batch's event in commit order", got)
		}
		for w, err := range errs {
			if err != nil {
				t.Errorf("relay of %s = %v, want nil", w, err)
			}
		}
		g.mu.Lock()
		left, leading := len(g.pending), g.committing
		g.mu.Unlock()
		if left != 0 || leading {
			t.Errorf("after the relays %d are left (leading %v), want none", left, leading)
		}
	})
}

// A commit that fails fails every caller whose batch it held, with its
// error, and publishes nothing of it; the commits before and after it
// are not touched.
func TestAFailedRelayCommitFailsEveryCallerInIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("disk full")
		st := &gatedRelays{gate: make(chan struct{}), fail: func(commit int) error {
			if commit == 2 {
				return boom
			}
			return nil
		}}
		pub := &published{}
		g := &relayGroup{store: st, lock: &sync.Mutex{}, publish: pub.publish}
		var mu sync.Mutex
		errs := map[string]error{}
		var wg sync.WaitGroup
		for _, w := range []string{"a", "b", "c", "d"} {
			wg.Go(func() {
				err := g.relay(t.Context(), relayBatch(w))
				mu.Lock()
				errs[w] = err
				mu.Unlock()
			})
			synctest.Wait()
		}
		close(st.gate)
		wg.Wait()
		if got := st.commitLog(); !reflect.DeepEqual(got, [][]string{{"a"}, {"b", "c", "d"}}) {
			t.Fatalf("commits = %v, want [a] then [b c d] shared", got)
		}
		if errs["a"] != nil {
			t.Errorf("relay of a (the first commit) = %v, want nil", errs["a"])
		}
		for _, w := range []string{"b", "c", "d"} {
			if !errors.Is(errs[w], boom) {
				t.Errorf("relay of %s = %v, want the failed commit's error", w, errs[w])
			}
		}
		if got := pub.got(); !reflect.DeepEqual(got, []string{"a-e"}) {
			t.Errorf("published %v, want a's event alone: nothing of a failed commit", got)
		}
		// The group goes on: the next relay has a commit of its own.
		if err := g.relay(t.Context(), relayBatch("e")); err != nil {
			t.Errorf("a relay after the failed commit = %v, want nil", err)
		}
	})
}

// A batch whose caller has gone by the time its commit starts is left
// out of it, and that caller hears why; a caller that goes while its
// batch commits does not end the commit for the others in it.
func TestARelayWhoseCallerWentIsLeftOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gatedRelays{gate: make(chan struct{})}
		pub := &published{}
		g := &relayGroup{store: st, lock: &sync.Mutex{}, publish: pub.publish}
		gone, cancel := context.WithCancel(t.Context())
		var mu sync.Mutex
		errs := map[string]error{}
		var wg sync.WaitGroup
		for _, w := range []string{"a", "b", "c"} {
			ctx := t.Context()
			if w == "a" || w == "b" {
				ctx = gone
			}
			wg.Go(func() {
				err := g.relay(ctx, relayBatch(w))
				mu.Lock()
				errs[w] = err
				mu.Unlock()
			})
			synctest.Wait()
		}
		cancel() // a's batch is in a commit; b's waits for the next
		close(st.gate)
		wg.Wait()
		if got := st.commitLog(); !reflect.DeepEqual(got, [][]string{{"a"}, {"c"}}) {
			t.Errorf("commits = %v, want [a] then [c]: b's caller went before its commit", got)
		}
		if errs["a"] != nil || errs["c"] != nil {
			t.Errorf("relays of a and c = %v, %v; want both committed", errs["a"], errs["c"])
		}
		if !errors.Is(errs["b"], context.Canceled) {
			t.Errorf("relay of b = %v, want its context's error", errs["b"])
		}
		if got := pub.got(); !reflect.DeepEqual(got, []string{"a-e", "c-e"}) {
			t.Errorf("published %v, want a's and c's events", got)
		}
	})
}

// A caller that finds no commit running makes the next one at once, with
// the batches that wait for theirs ahead of its own, rather than waiting
// for the first of those to be woken to make it.
func TestARelayThatFindsNoCommitRunningMakesTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gatedRelays{}
		pub := &published{}
		g := &relayGroup{store: st, lock: &sync.Mutex{}, publish: pub.publish}
		// b's caller was told that the last commit ended and has not run
		// yet (it never will here).
		b := &relayPart{ctx: t.Context(), b: relayBatch("b"), wake: make(chan struct{}, 1)}
		b.tell()
		g.pending = []*relayPart{b}
		done := make(chan error, 1)
		go func() { done <- g.relay(t.Context(), relayBatch("c")) }()
		synctest.Wait()
		if got := st.commitLog(); !reflect.DeepEqual(got, [][]string{{"b", "c"}}) {
			t.Errorf("commits = %v, want one of b then c, made by c's caller", got)
			// Let c's caller go: b's is not coming.
			g.mu.Lock()
			g.pending = g.pending[1:]
			g.pending[0].tell()
			g.mu.Unlock()
		}
		if err := <-done; err != nil {
			t.Errorf("relay of c = %v", err)
		}
		if !b.done || b.err != nil {
			t.Errorf("b's batch: done %v, err %v; want committed with c's", b.done, b.err)
		}
		if got := pub.got(); !reflect.DeepEqual(got, []string{"b-e", "c-e"}) {
			t.Errorf("published %v, want b's event then c's", got)
		}
	})
}

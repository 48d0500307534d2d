package jobs

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store/memstore"
)

// memStore is the shared in-memory store (memstore) as the tracker's
// Store, keeping every write in order.
type memStore struct {
	*memstore.Store
	mu     sync.Mutex
	writes []contract.Job
}

func newMemStore() *memStore { return &memStore{Store: memstore.New()} }

func (m *memStore) PutJob(ctx context.Context, j contract.Job) error {
	m.mu.Lock()
	m.writes = append(m.writes, Clone(j))
	m.mu.Unlock()
	return m.Store.PutJob(ctx, j)
}

func (m *memStore) written() []contract.Job {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.writes)
}

func begin(t *testing.T, tr *Tracker, workers ...string) *Run {
	t.Helper()
	var rows []contract.JobWorker
	for _, w := range workers {
		rows = append(rows, contract.JobWorker{WorkerID: w})
	}
	r, err := tr.Begin(t.Context(), contract.JobKindInstall, contract.JobSpec{Platform: contract.PlatformAndroid, Version: "37"}, rows)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAPercentageIsWrittenAtMostOnceASecondAndTheLastOneAlways(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		tr := New(Options{Store: st})
		r := begin(t, tr, "a")
		r.Emit(phase("a", contract.PhaseDownload, contract.PhaseStart))
		before := len(st.written())
		for _, p := range []float64{10, 20, 30, 40} {
			r.Emit(progress("a", p, 0, 0))
			time.Sleep(200 * time.Millisecond)
		}
		if got := len(st.written()) - before; got != 0 {
			t.Fatalf("%d writes for four percentages within a second of the phase's write, want none yet", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		w := st.written()
		if got := len(w) - before; got != 1 || *w[len(w)-1].Workers[0].Percent != 40 {
			t.Fatalf("after the second passed: %d writes, want one holding the last percentage, 40", got)
		}
		r.Emit(progress("a", 55, 0, 0))
		job, _ := r.End()
		w = st.written()
		if last := w[len(w)-1]; last.State != job.State || last.EndedAt == 0 || *last.Workers[0].Percent != 55 {
			t.Fatalf("the last write is %+v, want the ended job with 55%%", last)
		}
	})
}

func TestAPhaseIsWrittenBeforeAnyFollowerHearsOfIt(t *testing.T) {
	synctest.Test(t, testAPhaseIsWrittenBeforeAnyFollowerHearsOfIt)
}

func testAPhaseIsWrittenBeforeAnyFollowerHearsOfIt(t *testing.T) {
	st := &gatedStore{memStore: newMemStore()}
	tr := New(Options{Store: st})
	r := begin(t, tr, "a")
	heard := make(chan string, 16)
	go func() {
		_ = tr.Follow(t.Context(), r.ID(), func(ev contract.JobEvent) { heard <- ev.Name() })
	}()
	synctest.Wait()
	<-heard // the state it starts from
	st.gate = make(chan struct{})
	go r.Emit(phase("a", contract.PhaseDownload, contract.PhaseStart))
	synctest.Wait() // the write is under way, held
	select {
	case name := <-heard:
		close(st.gate)
		t.Fatalf("a follower heard %s while its write was still under way", name)
	default:
	}
	close(st.gate)
	synctest.Wait()
	if name := <-heard; name != "phase" {
		t.Fatalf("after the write the follower heard %s, want the phase", name)
	}
	st.gate = nil
	r.End()
}

// gatedStore holds each write until gate is closed, when gate is set.
type gatedStore struct {
	*memStore
	gate chan struct{}
}

func (g *gatedStore) PutJob(ctx context.Context, j contract.Job) error {
	if g.gate != nil {
		<-g.gate
	}
	return g.memStore.PutJob(ctx, j)
}

func TestALateFollowerGetsTheStateFirstThenTheRestAndDone(t *testing.T) {
	synctest.Test(t, testALateFollowerGetsTheStateFirstThenTheRestAndDone)
}

func testALateFollowerGetsTheStateFirstThenTheRestAndDone(t *testing.T) {
	tr := New(Options{Store: newMemStore()})
	r := begin(t, tr, "a", "b")
	r.Emit(phase("a", contract.PhaseDownload, contract.PhaseStart))
	r.Emit(progress("a", 41.7, 417, 1000))
	var got []contract.JobEvent
	done := make(chan error, 1)
	go func() {
		done <- tr.Follow(t.Context(), r.ID(), func(ev contract.JobEvent) { got = append(got, ev) })
	}()
	synctest.Wait() // the follower is in, waiting
	r.Emit(contract.JobEvent{Worker: &contract.JobWorkerEvent{WorkerID: "a", Status: contract.WorkerEnded, Outcome: contract.OutcomeInstalled}})
	r.End()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Job == nil || got[1].Worker == nil || got[2].Done == nil {
		t.Fatalf("the late follower got %d events %+v, want the state, the worker's end, then done", len(got), got)
	}
	if a := got[0].Job.Workers[0]; a.Percent == nil || *a.Percent != 41.7 {
		t.Errorf("the state it started from has row a at %+v, want 41.7%%", a)
	}
	if d := got[2].Done; d.Result != contract.JobFailed || d.Workers[1].Outcome != contract.OutcomeUnknown {
		t.Errorf("done is %+v, want failed with b unknown (it never said)", d)
	}
	var after []string
	if err := tr.Follow(t.Context(), r.ID(), func(ev contract.JobEvent) { after = append(after, ev.Name()) }); err != nil || !slices.Equal(after, []string{"job", "done"}) {
		t.Errorf("following the ended job gave %v %v, want job then done", after, err)
	}
}

func TestRecoverEndsAJobLeftRunningWithItsOpenRowsUnknown(t *testing.T) {
	st := newMemStore()
	r := begin(t, New(Options{Store: st}), "a", "b")
	r.Emit(contract.JobEvent{Worker: &contract.JobWorkerEvent{WorkerID: "a", Status: contract.WorkerEnded, Outcome: contract.OutcomeInstalled}})
	// The daemon dies here; the next one recovers.
	if err := New(Options{Store: st}).Recover(t.Context()); err != nil {
		t.Fatal(err)
	}
	j, _, _ := st.Job(t.Context(), r.ID())
	if j.State != contract.JobFailed || j.EndedAt == 0 || j.Workers[0].Outcome != contract.OutcomeInstalled || j.Workers[1].Outcome != contract.OutcomeUnknown {
		t.Fatalf("after recovery the job is %+v, want failed, a installed, b unknown", j)
	}
}

func TestAnUnknownJobIsUnknownJob(t *testing.T) {
	_, err := New(Options{Store: newMemStore()}).Get(t.Context(), "job_nope")
	if ce := contract.AsError(err); ce.Code != contract.CodeUnknownJob {
		t.Fatalf("Get of an unknown job = %v, want UNKNOWN_JOB", err)
	}
}

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// fakeEvents is a daemon's event log and live stream, as a session sees
// them.
type fakeEvents struct {
	mu   sync.Mutex
	log  []contract.Event
	live chan contract.Event
}

func newFakeEvents(upTo int64) *fakeEvents {
	f := &fakeEvents{live: make(chan contract.Event, 16)}
	for seq := int64(1); seq <= upTo; seq++ {
		f.log = append(f.log, contract.Event{Seq: seq, Event: "lease.renewed", Payload: json.RawMessage(`{}`)})
	}
	return f
}

func (f *fakeEvents) Subscribe(context.Context) (<-chan contract.Event, int64, error) {
	return f.live, 0, nil
}

func (f *fakeEvents) Replay(_ context.Context, q contract.EventsReplayInput) ([]contract.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []contract.Event
	for _, ev := range f.log {
		if ev.Seq > q.AfterSeq {
			out = append(out, ev)
		}
	}
	return out, nil
}

// push appends an event to the log and streams it live.
func (f *fakeEvents) push(seq int64) {
	ev := contract.Event{Seq: seq, Event: "lease.renewed", Payload: json.RawMessage(`{}`)}
	f.mu.Lock()
	f.log = append(f.log, ev)
	f.mu.Unlock()
	f.live <- ev
}

// seqsOf reads the seqs of the JSON lines streamEvents printed.
func seqsOf(t *testing.T, out string) []int64 {
	t.Helper()
	var seqs []int64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev contract.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("a line is not an event: %q", line)
		}
		seqs = append(seqs, ev.Seq)
	}
	return seqs
}

// A followed stream that ends (the daemon restarted, a gateway replica took
// over) is followed again once a daemon answers: the events committed
// meanwhile are printed from its history, then its live ones, each once
// and in order, and stderr says what happened.
func TestEventsFollowReconnectsAndLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		first, second := newFakeEvents(3), newFakeEvents(0)
		tries := 0
		again := func(context.Context) (eventSource, func(), error) {
			if tries++; tries < 3 {
				return nil, nil, errors.New("connection refused") // the daemon is not back yet
			}
			return second, func() {}, nil
		}
		var out, notes bytes.Buffer
		done := make(chan error, 1)
		go func() { done <- streamEvents(ctx, first, &out, &notes, contract.EventsReplayInput{}, true, again) }()
		synctest.Wait()
		first.push(4)
		synctest.Wait()
		// The daemon goes; it commits 5 to 7 before the stream is back.
		second.log = append(append(second.log, first.log...), newFakeEvents(7).log[4:]...)
		close(first.live)
		// Two tries a quarter second apart find nothing; the third finds
		// the daemon back (the clock is the bubble's).
		time.Sleep(600 * time.Millisecond)
		synctest.Wait()
		second.live <- second.log[6] // 7 again, live: already printed from history
		second.push(8)
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("streamEvents = %v, want nil once its context ends", err)
		}
		if got, want := seqsOf(t, out.String()), []int64{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(got, want) {
			t.Errorf("printed seqs %v, want %v", got, want)
		}
		if tries != 3 {
			t.Errorf("reached the daemon again on try %d, want 3", tries)
		}
		for _, want := range []string{"ended after seq 4; reconnecting", "following again from seq 7"} {
			if !strings.Contains(notes.String(), want) {
				t.Errorf("stderr %q does not say %q", notes.String(), want)
			}
		}
	})
}

// A followed stream whose daemon does not answer again within
// followReconnect ends with DAEMON_CONNECTION_LOST, then and not before;
// without a way to reach it again, at once.
func TestEventsFollowGivesUpAfterItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newFakeEvents(1)
		close(src.live)
		never := func(context.Context) (eventSource, func(), error) { return nil, nil, errors.New("connection refused") }
		start := time.Now()
		err := streamEvents(t.Context(), src, &bytes.Buffer{}, &bytes.Buffer{}, contract.EventsReplayInput{}, true, never)
		var ce *contract.Error
		if !errors.As(err, &ce) || ce.Code != contract.CodeDaemonConnectionLost {
			t.Fatalf("streamEvents = %v, want DAEMON_CONNECTION_LOST", err)
		}
		if waited := time.Since(start); waited < followReconnect || waited > followReconnect+time.Second {
			t.Errorf("gave up after %s, want %s", waited, followReconnect)
		}
		src = newFakeEvents(1)
		close(src.live)
		start = time.Now()
		err = streamEvents(t.Context(), src, &bytes.Buffer{}, &bytes.Buffer{}, contract.EventsReplayInput{}, true, nil)
		if !errors.As(err, &ce) || ce.Code != contract.CodeDaemonConnectionLost || time.Since(start) != 0 {
			t.Errorf("without a way back: %v after %s, want DAEMON_CONNECTION_LOST at once", err, time.Since(start))
		}
	})
}

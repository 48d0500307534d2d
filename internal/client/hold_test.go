package client

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/wire"
)

// renewals is a fake daemon's record of the renewals it answered.
type renewals struct {
	mu    sync.Mutex
	at    []time.Duration // since the start of the bubble
	start time.Time
	// gone makes renewals from this one on answer UNKNOWN_LEASE (0: never).
	gone int
}

func (r *renewals) answer(req contract.Request, w *wire.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.Op != contract.OpLeaseRenew {
		w.Write(contract.Response{ID: req.ID, Error: contract.Errorf(contract.CodeUnknownRequest, "not renew")})
		return
	}
	r.at = append(r.at, time.Since(r.start))
	if r.gone > 0 && len(r.at) >= r.gone {
		w.Write(contract.Response{ID: req.ID, Error: contract.Errorf(contract.CodeUnknownLease, "no lease lse_1")})
		return
	}
	res, _ := json.Marshal(contract.LeaseRecord{ID: "lse_1", TTLMs: 3000, TTLDeadline: int64(len(r.at))})
	w.Write(contract.Response{ID: req.ID, Result: res})
}

func (r *renewals) times() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.at...)
}

func TestHoldRenewsEveryThirdOfTheTTLAndRetriesAfterAFailedConnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewals{start: time.Now()}
		c, err := New(context.Background(), fakeDaemon(t, r.answer), contract.HelloInput{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		connects := 0
		connect := func(context.Context) (*Client, error) {
			connects++
			if connects == 2 {
				return nil, contract.Errorf(contract.CodeDaemonConnectionLost, "daemon away")
			}
			return c, nil
		}
		var heard []int64
		failed := 0
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Hold(ctx, contract.LeaseRecord{ID: "lse_1", TTLMs: 3000}, connect, func(rec contract.LeaseRecord, err error) {
				if err != nil {
					failed++
					return
				}
				heard = append(heard, rec.TTLDeadline)
			})
		}()
		time.Sleep(4500 * time.Millisecond) // ticks at 1 s, 2 s (no daemon), 3 s, 4 s
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Hold after its context ended = %v, want nil", err)
		}
		want := []time.Duration{time.Second, 3 * time.Second, 4 * time.Second}
		got := r.times()
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("renewals at %v, want %v (every TTL/3, the one without a daemon skipped)", got, want)
		}
		if len(heard) != 3 || heard[2] != 3 || failed != 1 {
			t.Errorf("report heard records %v and %d failures, want the three records in order and the one failure", heard, failed)
		}
	})
}

func TestHoldEndsWithErrLeaseGoneWhenTheDaemonNoLongerKnowsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &renewals{start: time.Now(), gone: 2}
		c, err := New(context.Background(), fakeDaemon(t, r.answer), contract.HelloInput{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err = Hold(context.Background(), contract.LeaseRecord{ID: "lse_1", TTLMs: 3000},
			func(context.Context) (*Client, error) { return c, nil }, nil)
		if !errors.Is(err, ErrLeaseGone) || contract.AsError(err).Code != contract.CodeUnknownLease {
			t.Fatalf("Hold = %v, want ErrLeaseGone with UNKNOWN_LEASE", err)
		}
		if got := r.times(); len(got) != 2 || got[1] != 2*time.Second {
			t.Errorf("renewals at %v, want two, the second (refused) at 2 s", got)
		}
	})
}

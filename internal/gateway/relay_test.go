package gateway

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/simlock/simlock/internal/contract"
)

// The uplink's read loop hands a command's output on without waiting for a
// caller that does not read: the chunks wait in the relay and reach the
// caller in order, after the started signal, once it reads; close returns
// when all were handed on.
func TestAnExecRelayNeverMakesTheUplinkWaitForASlowCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reading := make(chan struct{})
		var got []string
		r := newExecRelay(func() { got = append(got, "started") }, func(o contract.ExecOutput) {
			<-reading // the caller reads nothing until the test says so
			got = append(got, o.Chunk)
		}, func() { t.Error("a backlog of 100 short chunks overflowed") })
		// On a failure too, the caller reads at last, and the relay ends.
		defer r.close()
		defer closeOnce(reading)

		var handedOver atomic.Bool
		go func() {
			r.start()
			for i := range 100 {
				r.add(contract.ExecOutput{Stream: "stdout", Chunk: fmt.Sprint(i)})
			}
			handedOver.Store(true)
		}()
		synctest.Wait()
		if !handedOver.Load() {
			t.Fatal("the read loop waited for a caller that does not read")
		}
		closeOnce(reading)
		r.close()
		synctest.Wait()
		want := []string{"started"}
		for i := range 100 {
			want = append(want, fmt.Sprint(i))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("the caller got %v, want started then 0..99 in order", got)
		}
	})
}

// A caller more than maxExecBacklog behind is no longer served: overflow is
// called once, nothing more reaches it, and the relay says why.
func TestAnExecRelayStopsServingACallerTooFarBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reading := make(chan struct{})
		var delivered, overflows int
		r := newExecRelay(nil, func(contract.ExecOutput) {
			<-reading
			delivered++
		}, func() { overflows++ })
		defer r.close()
		defer closeOnce(reading)
		chunk := strings.Repeat("x", 1<<20)
		for range maxExecBacklog>>20 + 3 {
			r.add(contract.ExecOutput{Stream: "stdout", Chunk: chunk})
		}
		if overflows != 1 || !r.overflowed() {
			t.Fatalf("after %d MiB waiting: %d overflows, overflowed() = %v; want one, true", maxExecBacklog>>20+3, overflows, r.overflowed())
		}
		closeOnce(reading)
		r.close()
		if delivered > 1 {
			t.Errorf("%d chunks reached a caller the relay stopped serving, want at most the one it was handing on", delivered)
		}
		r.add(contract.ExecOutput{Stream: "stdout", Chunk: "late"})
		if overflows != 1 {
			t.Errorf("overflow called %d times, want once", overflows)
		}
	})
}

// closeOnce closes ch unless it is closed: a test lets its caller read at
// last on every way out, failures included, so the relay's goroutine ends.
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

package gateway

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A forward bounded by silence lives as long as the worker keeps speaking
// within the bound, however long that is, and ends exactly one bound after
// it last spoke.
func TestSilenceBoundRestartsAtEachWordAndEndsOneBoundAfterTheLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, heard, stop := withSilence(context.Background(), time.Second)
		defer stop()
		start := time.Now()
		// Output every 500 ms for 3 s: six times the bound.
		for range 6 {
			time.Sleep(500 * time.Millisecond)
			if ctx.Err() != nil {
				t.Fatalf("the forward ended after %s while the worker spoke every 500 ms (bound 1s)", time.Since(start))
			}
			heard()
		}
		<-ctx.Done()
		if took := time.Since(start); took != 4*time.Second {
			t.Errorf("the forward ended %s after its start, want 4s: one bound after the last word at 3s", took)
		}
		if !silent(ctx) {
			t.Errorf("the forward's end is %v, want the worker's silence", context.Cause(ctx))
		}
	})
}

// A worker that says nothing is given up on at the bound; a parent that
// ends first is not taken for silence.
func TestSilenceBoundEndsASilentForwardAndKeepsItsParentsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, _, stop := withSilence(context.Background(), 1500*time.Millisecond)
		defer stop()
		start := time.Now()
		<-ctx.Done()
		if took := time.Since(start); took != 1500*time.Millisecond || !silent(ctx) {
			t.Errorf("a silent forward ended after %s (cause %v), want 1.5s for its silence", took, context.Cause(ctx))
		}

		parent, cancel := context.WithCancel(context.Background())
		ctx, _, stop2 := withSilence(parent, time.Second)
		defer stop2()
		cancel()
		<-ctx.Done()
		if silent(ctx) {
			t.Errorf("a forward whose caller went away reads as the worker's silence")
		}
	})
}

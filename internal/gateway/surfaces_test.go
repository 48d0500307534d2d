package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
)

// rejectedReasons are the reasons of the lease.rejected events st committed.
func rejectedReasons(t *testing.T, st *memQueueStore) []string {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []string
	for _, ev := range st.events {
		if ev.Event != "lease.rejected" {
			continue
		}
		var p struct {
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Reason)
	}
	return out
}

// Each refusal of the fast-fail table is recorded with its own reason: a
// fleet with no worker that takes requests is no-worker, not a spec that
// cannot be resolved; a model no worker has is unresolvable-spec.
func TestAFastFailIsRecordedWithItsOwnReason(t *testing.T) {
	for _, tc := range []struct {
		name   string
		view   *contract.WorkerView
		in     contract.LeaseRequestInput
		code   contract.Code
		reason string
	}{
		{"every worker drained", with(view("w1", 0, 2), func(v *contract.WorkerView) { v.Drained = true }),
			contract.LeaseRequestInput{Platform: contract.PlatformIOS}, contract.CodeNoCapacity, "no-worker"},
		{"a model nobody has", view("w1", 0, 2),
			contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 3G"}, contract.CodeUnknownModel, "unresolvable-spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &memQueueStore{}
			f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
			f.put(*tc.view)
			l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
			defer l.Close()
			_, err := l.Submit(context.Background(), queue.Caller{Principal: "agent"}, tc.in)
			if code(err) != tc.code {
				t.Fatalf("the request: %v, want %s", err, tc.code)
			}
			if got := rejectedReasons(t, st); len(got) != 1 || got[0] != tc.reason {
				t.Errorf("lease.rejected reasons %v, want [%s]", got, tc.reason)
			}
		})
	}
}

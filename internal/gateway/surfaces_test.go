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
	var out []string
	for _, ev := range st.storedEvents() {
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
			st := newQueueStore()
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

// scrub rewrites a worker's names in its refusal: a lease the gateway
// granted by the gateway's id, any other lease and the worker's requests
// without their ids (a detail that is only such an id goes), and the
// gateway's requester prefix dropped, nested details included.
func TestScrubRewritesAWorkersOwnNames(t *testing.T) {
	st := newQueueStore()
	g := grantOf("w1", "lse_0a", "agent-a", "tok_alice", "build-42")
	st.putGrant(g)
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	defer l.Close()
	if err := l.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	in := contract.Errorf(contract.CodeRequesterAlreadyLeased, "gw:ins_gw:agent-a holds lse_0a and lse_ff (request req_12)").
		With("existingLeaseId", "lse_ff").With("leaseId", "lse_0a").With("existingRequestId", "req_12").
		With("requesterId", "gw:ins_gw:agent-a").With("nested", map[string]any{"ids": []any{"lse_0a", "gw:ins_other:x"}})
	out := l.scrub("w1", in)
	if want := "agent-a holds build-42 and a lease of worker w1 (request a request on worker w1)"; out.Message != want {
		t.Errorf("message %q, want %q", out.Message, want)
	}
	for k, want := range map[string]any{"leaseId": "build-42", "requesterId": "agent-a", "workerId": "w1"} {
		if out.Details[k] != want {
			t.Errorf("detail %s = %v, want %v", k, out.Details[k], want)
		}
	}
	for _, k := range []string{"existingLeaseId", "existingRequestId"} {
		if v, ok := out.Details[k]; ok {
			t.Errorf("detail %s = %v, want it dropped", k, v)
		}
	}
	ids := out.Details["nested"].(map[string]any)["ids"].([]any)
	if ids[0] != "build-42" || ids[1] != "x" {
		t.Errorf("nested ids %v, want [build-42 x]", ids)
	}
	if in.Message != "gw:ins_gw:agent-a holds lse_0a and lse_ff (request req_12)" || in.Details["leaseId"] != "lse_0a" {
		t.Errorf("scrub changed the worker's error it was given: %+v", in)
	}
}

// The gateway refuses a call on a lease by whoever may not act on it,
// from its own index, before anything is forwarded: the worker cannot
// (the uplink's session is an admin's). Another agent naming the lease's
// key is FORBIDDEN (the HTTP API answers it 404) on renew, release, get,
// watch and exec; an admin runs a command on someone else's lease only
// naming its requester, and the right one. Each refusal would otherwise be forwarded to the
// lease's worker, which is not connected here: WORKER_UNREACHABLE.
func TestTheGatewayRefusesANonOwnersCallsOnALeaseBeforeForwarding(t *testing.T) {
	st := newQueueStore()
	g := grantOf("w1", "lse_0a", "agent-a", "tok_alice", "")
	st.putGrant(g)
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	defer l.Close()
	if err := l.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	bob := queue.Caller{Principal: "tok_bob"}
	exec := func(c queue.Caller, requester string) error {
		_, err := l.Exec(context.Background(), c, contract.ExecInput{LeaseID: g.Key, Tool: "simctl", Args: []string{"list"}, RequesterID: requester}, nil, func(contract.ExecOutput) {})
		return err
	}
	for _, tc := range []struct {
		what string
		call func() error
		want contract.Code
	}{
		{"renew by another agent", func() error {
			_, err := l.Renew(bob, contract.LeaseRenewInput{LeaseID: g.Key})
			return err
		}, contract.CodeForbidden},
		{"release by another agent", func() error {
			_, err := l.Release(bob, contract.LeaseIDInput{LeaseID: g.Key})
			return err
		}, contract.CodeForbidden},
		{"get by another agent", func() error {
			_, err := l.Get(bob, contract.LeaseIDInput{LeaseID: g.Key})
			return err
		}, contract.CodeForbidden},
		{"watch by another agent", func() error {
			_, err := l.Watch(bob, g.Key)
			return err
		}, contract.CodeForbidden},
		{"exec by another agent", func() error { return exec(bob, "") }, contract.CodeForbidden},
		{"exec by another agent naming the requester", func() error { return exec(bob, "agent-a") }, contract.CodeForbidden},
		{"exec by an admin naming no requester", func() error { return exec(queue.Caller{Principal: "op", Admin: true}, "") }, contract.CodeForbidden},
		{"exec by an admin naming another requester", func() error { return exec(queue.Caller{Principal: "op", Admin: true}, "agent-b") }, contract.CodeForbidden},
		{"exec by its owner naming another requester", func() error { return exec(queue.Caller{Principal: "tok_alice"}, "agent-b") }, contract.CodeForbidden},
		// What may pass is forwarded: to a worker that is not there.
		{"renew by its owner", func() error {
			_, err := l.Renew(queue.Caller{Principal: "tok_alice"}, contract.LeaseRenewInput{LeaseID: g.Key})
			return err
		}, contract.CodeWorkerUnreachable},
		{"exec by an admin naming its requester", func() error { return exec(queue.Caller{Principal: "op", Admin: true}, "agent-a") }, contract.CodeWorkerUnreachable},
		{"release by its owner", func() error {
			_, err := l.Release(queue.Caller{Principal: "tok_alice"}, contract.LeaseIDInput{LeaseID: g.Key})
			return err
		}, contract.CodeWorkerUnreachable},
		{"get by its owner", func() error {
			_, err := l.Get(queue.Caller{Principal: "tok_alice"}, contract.LeaseIDInput{LeaseID: g.Key})
			return err
		}, contract.CodeWorkerUnreachable},
		{"exec by its owner", func() error { return exec(queue.Caller{Principal: "tok_alice"}, "") }, contract.CodeWorkerUnreachable},
	} {
		if got := code(tc.call()); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.what, got, tc.want)
		}
	}
	if _, ok := st.grant(g.Key); !ok {
		t.Errorf("the refusals, or a release its worker could not hear, ended the lease's grant record")
	}
	if got := l.Leases(queue.Caller{Principal: "tok_alice"}, nil); len(got) != 1 || got[0].ID != g.Key || !got[0].Unreachable {
		t.Errorf("the owner's lease list is %+v, want %s marked unreachable", got, g.Key)
	}
}

// A request a previous run of the gateway left open is put back in line at
// start; a lease a worker granted for it that the gateway never recorded
// (the worker answered after the gateway died) is given back when a
// snapshot shows it, so the request is served by a grant the gateway
// records. A lease the worker grants the requester after the restart is
// not taken for it.
func TestALeaseGrantedForARequestRestoredAtStartIsGivenBack(t *testing.T) {
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	f.put(*remembered("w1"))
	l := NewLeasing(f, LeasingOptions{Store: newQueueStore(), DefaultTTL: time.Minute, MaxTTL: time.Hour})
	defer l.Close()
	before := time.Now().Add(-time.Second).UnixMilli()
	open := contract.LeaseRequestRecord{ID: "req_open", RequesterID: "agent-a", OwnerID: "tok_a", State: contract.RequestStarting,
		Spec: contract.RequestSpec{Platform: contract.PlatformIOS}, CreatedAt: before}
	if err := l.Restore(context.Background(), []contract.LeaseRequestRecord{open}); err != nil {
		t.Fatal(err)
	}
	if ws, _ := l.Waiting(queue.Caller{Admin: true}); len(ws) != 1 || ws[0].RequestID != "req_open" || ws[0].Stage != "queued" {
		t.Fatalf("after the restore the waiting list is %+v, want req_open queued", ws)
	}
	after := time.Now().Add(time.Second).UnixMilli()
	snapshot := []contract.LeaseRecord{
		{ID: "lse_orphan", DeviceID: "dev_1", RequesterID: l.idx.prefix + "agent-a", OwnerID: "tok_a", GrantedAt: before},
		{ID: "lse_later", DeviceID: "dev_2", RequesterID: l.idx.prefix + "agent-a", OwnerID: "tok_a", GrantedAt: after},
		{ID: "lse_other", DeviceID: "dev_3", RequesterID: l.idx.prefix + "agent-b", OwnerID: "tok_b", GrantedAt: before},
	}
	var giveBack []string
	var found []finding
	_ = l.q.Do(func(*queue.Txn) error {
		giveBack, found = l.idx.reconcile("w1", statusRead{leases: snapshot, gen: 1}, time.Now())
		return nil
	})
	if len(giveBack) != 1 || giveBack[0] != "lse_orphan" {
		t.Errorf("given back %v, want [lse_orphan]: the lease granted for the request the restart settled", giveBack)
	}
	if len(found) != 2 {
		t.Errorf("findings %d, want 2 (the later lease and another requester's, neither given back)", len(found))
	}
}

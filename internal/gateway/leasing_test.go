package gateway

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// A request bounced off a worker marks the worker stale for its class of
// need; once the request ended in line (here, its timeout) and the
// mark's backoff is long over, the next view change forgets it: what a
// long-running gateway keeps is bounded by what waits, not by what ever
// bounced.
func TestABouncedRequestThatEndsInLineLeavesNoMarkBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
		f.put(*view("w1", 0, 2)) // connected, but no client yet: a dispatch bounces
		l := NewLeasing(f, LeasingOptions{Store: newQueueStore(), DefaultTTL: time.Minute, MaxTTL: time.Hour})
		st, err := l.Submit(context.Background(), queue.Caller{Principal: "agent"},
			contract.LeaseRequestInput{Platform: contract.PlatformIOS, TimeoutMs: 2000})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		l.q.View(func() {
			if len(l.stale) != 1 {
				t.Fatalf("after the bounce the gateway keeps %d stale marks, want 1 (the worker, for the bounced need)", len(l.stale))
			}
		})
		time.Sleep(3 * time.Second) // past the request's timeoutMs, on the bubble's clock
		synctest.Wait()
		got, err := l.RequestStatus(context.Background(), queue.Caller{Admin: true}, contract.LeaseRequestGetInput{RequestID: st.Request.ID})
		if err != nil || got.Request.State != contract.RequestFailed || got.Request.Error == nil || got.Request.Error.Code != contract.CodeQueueTimeout {
			t.Fatalf("the bounced request is %s %+v (%v), want failed with QUEUE_TIMEOUT", got.Request.State, got.Request.Error, err)
		}
		time.Sleep(staleBackoffMax + staleBackoffMax)
		l.viewChanged("w1", statusRead{gen: 1}, true) // the worker's next refresh
		l.q.View(func() {
			if len(l.stale) != 0 {
				t.Errorf("long after the request timed out the gateway still keeps %d stale marks", len(l.stale))
			}
		})
		l.Close()
	})
}

// A restarted gateway's leases are its grant records: loaded before any
// worker is heard from, each owner's chosen id resolves to its own lease
// (another owner's is UNKNOWN_LEASE), and a requester with a recorded
// lease is REQUESTER_ALREADY_LEASED.
func TestTheLeaseIndexIsLoadedFromTheGrantRecordsAtStart(t *testing.T) {
	st := newQueueStore()
	for _, g := range []store.Grant{grantOf("w1", "lse_a", "agent-a", "tok_alice", "build-42"), grantOf("w2", "lse_b", "agent-b", "tok_bob", "build-42")} {
		st.putGrant(g)
	}
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour})
	defer l.Close()
	if err := l.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	for who, worker := range map[string]string{"tok_alice": "w1", "tok_bob": "w2"} {
		// Resolved to its own lease: forwarded to that lease's worker,
		// which is not connected.
		_, err := l.Renew(queue.Caller{Principal: who}, contract.LeaseRenewInput{LeaseID: "build-42"})
		var ce *contract.Error
		if !errors.As(err, &ce) || ce.Code != contract.CodeWorkerUnreachable || ce.Details["workerId"] != worker {
			t.Errorf("%s renewing build-42: %v, want it sent to %s", who, err, worker)
		}
	}
	if _, err := l.Renew(queue.Caller{Principal: "tok_carol"}, contract.LeaseRenewInput{LeaseID: "build-42"}); code(err) != contract.CodeUnknownLease {
		t.Errorf("carol renewing build-42: %v, want UNKNOWN_LEASE", err)
	}
	_, err := l.Submit(context.Background(), queue.Caller{Principal: "tok_alice", Admin: true}, contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: "agent-a"})
	if code(err) != contract.CodeRequesterAlreadyLeased {
		t.Errorf("a request of agent-a, whose lease is recorded: %v, want REQUESTER_ALREADY_LEASED", err)
	}
}

// A lease that ends on its worker is told to its holders once, by its
// chosen id with its key (the name sessions hold it by), with the owner
// from the grant record, and its record ends in the same decision.
func TestALeasesEndIsToldUnderItsChosenIDAndItsKeyAndEndsItsRecord(t *testing.T) {
	st := newQueueStore()
	g := grantOf("w1", "lse_a", "agent-a", "tok_alice", "build-42")
	st.putGrant(g)
	var told []string
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour,
		LeaseEnded: func(r contract.LeaseRecord, reason string) {
			told = append(told, r.ID+" "+r.UniqueKey()+" "+r.OwnerID+" "+reason)
		}})
	defer l.Close()
	if err := l.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.onEvent("w1", contract.Event{Event: "lease.expired", Payload: []byte(`{"leaseId":"lse_a","deviceId":"dev_lse_a","ownerId":"someone-else"}`)})
	if want := []string{"build-42 w1.lse_a tok_alice expired"}; !slices.Equal(told, want) {
		t.Errorf("told %v, want %v", told, want)
	}
	if gs, _ := st.Grants(context.Background()); len(gs) != 0 {
		t.Errorf("grant records after the end: %+v, want none", gs)
	}
}

// What the holders of a gateway lease hear of its device (a crash, a
// recovery, the lease's end) names the device the grant record names: a
// worker's event that names another device (another worker's, another
// tenant's) is about the lease, never a way to tell a holder of a device
// that is not its own.
func TestALeasesNoticesNameTheDeviceOfItsGrantRecord(t *testing.T) {
	st := newQueueStore()
	g := grantOf("w1", "lse_a", "agent-a", "tok_alice", "")
	st.putGrant(g)
	var told []string
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
	l := NewLeasing(f, LeasingOptions{Store: st, DefaultTTL: time.Minute, MaxTTL: time.Hour,
		LeaseEnded: func(r contract.LeaseRecord, reason string) { told = append(told, "ended "+r.DeviceID) },
		DeviceHealth: func(r contract.LeaseRecord, notice string, _ int) {
			told = append(told, notice+" "+r.DeviceID)
		}})
	defer l.Close()
	if err := l.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.onEvent("w1", contract.Event{Event: "device.crash-detected", Payload: []byte(`{"leaseId":"lse_a","deviceId":"dev_someone_elses"}`)})
	l.onEvent("w1", contract.Event{Event: "device.recovered", Payload: []byte(`{"leaseId":"lse_a","deviceId":"dev_someone_elses","attempts":1}`)})
	l.onEvent("w1", contract.Event{Event: "lease.expired", Payload: []byte(`{"leaseId":"lse_a","deviceId":"dev_someone_elses"}`)})
	want := []string{contract.PushDeviceUnhealthy + " dev_lse_a", contract.PushDeviceRecovered + " dev_lse_a", "ended dev_lse_a"}
	if !slices.Equal(told, want) {
		t.Errorf("the holders were told %v, want %v: the device of the grant record", told, want)
	}
}

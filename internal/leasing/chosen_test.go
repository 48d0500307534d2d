package leasing

import (
	"encoding/json"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/simlock/simlock/internal/contract"
)

// A chosen lease id is unique only within its owner. Two owners each
// choose build-42 and each gets it; each names its own by it on every
// operation; neither can learn of or reach the other's (UNKNOWN_LEASE,
// never FORBIDDEN, whether by the id or by the other's key); the same
// owner choosing it twice is LEASE_ID_TAKEN; an admin names one of the two
// by its key (the id alone is refused, naming the keys); the events name
// each by its key, with the chosen id beside it; and an ended lease's id is
// free for its owner again, under a new key.
func TestChosenLeaseIDsAreScopedPerOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		h := start(t, st, fixed(2))
		alice, bob := Caller{Principal: "alice"}, Caller{Principal: "bob"}
		ga := h.mustGrant(h.acquire("alice", contract.LeaseRequestInput{Platform: contract.PlatformIOS, LeaseID: "build-42"}))
		gb := h.mustGrant(h.acquire("bob", contract.LeaseRequestInput{Platform: contract.PlatformAndroid, LeaseID: "build-42"}))
		for _, g := range []contract.LeaseGrant{ga, gb} {
			if g.Lease.ID != "build-42" || !g.Lease.IDChosenByRequester || len(g.Lease.Key) == 0 || g.Lease.Key == "build-42" {
				t.Fatalf("grant %+v, want id build-42 with a key of its own", g.Lease)
			}
		}
		if ga.Lease.Key == gb.Lease.Key {
			t.Fatalf("two owners' leases share the key %s", ga.Lease.Key)
		}

		for _, c := range []struct {
			who  Caller
			want contract.LeaseGrant
		}{{alice, ga}, {bob, gb}} {
			got, err := h.e.Get(c.who, contract.LeaseIDInput{LeaseID: "build-42"})
			if err != nil || got.Lease.Key != c.want.Lease.Key || got.Device.ID != c.want.Device.ID {
				t.Errorf("%s's build-42 = %+v, %v; want its own, on %s", c.who.Principal, got.Lease, err, c.want.Device.ID)
			}
			rec, err := h.e.Renew(c.who, contract.LeaseRenewInput{LeaseID: "build-42"})
			if err != nil || rec.Key != c.want.Lease.Key {
				t.Errorf("%s renewing build-42 renewed %+v, %v; want its own", c.who.Principal, rec, err)
			}
		}
		if _, err := h.e.Get(alice, contract.LeaseIDInput{LeaseID: gb.Lease.Key}); contract.AsError(err).Code != contract.CodeUnknownLease {
			t.Errorf("alice naming bob's lease by its key: %v, want UNKNOWN_LEASE", err)
		}
		if _, err := h.e.Release(Caller{Principal: "carol"}, contract.LeaseIDInput{LeaseID: "build-42"}); contract.AsError(err).Code != contract.CodeUnknownLease {
			t.Errorf("carol releasing build-42, which is not hers: %v, want UNKNOWN_LEASE", err)
		}

		// The same owner choosing it again, from another of its requesters.
		dup := h.acquire("alice", contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: "alice/second", LeaseID: "build-42", NoWait: true})
		<-dup.done
		if contract.AsError(dup.err).Code != contract.CodeLeaseIDTaken {
			t.Errorf("alice choosing build-42 again: %v, want LEASE_ID_TAKEN", dup.err)
		}

		admin := Caller{Principal: "ops", Admin: true}
		_, err := h.e.Get(admin, contract.LeaseIDInput{LeaseID: "build-42"})
		if ce := contract.AsError(err); ce.Code != contract.CodeBadRequest || !slices.Contains(anyStrings(ce.Details["keys"]), ga.Lease.Key) || !slices.Contains(anyStrings(ce.Details["keys"]), gb.Lease.Key) {
			t.Errorf("an admin naming build-42, which two owners chose: %v, want BAD_REQUEST naming both keys", err)
		}
		if got, err := h.e.Get(admin, contract.LeaseIDInput{LeaseID: gb.Lease.Key}); err != nil || got.Lease.OwnerID != "bob" {
			t.Errorf("an admin naming bob's lease by its key: %+v, %v", got.Lease, err)
		}

		if res, err := h.e.Release(alice, contract.LeaseIDInput{LeaseID: "build-42"}); err != nil || res.LeaseID != "build-42" || res.DeviceID != ga.Device.ID {
			t.Fatalf("alice releasing build-42: %+v, %v; want hers released", res, err)
		}
		if got, err := h.e.Get(admin, contract.LeaseIDInput{LeaseID: "build-42"}); err != nil || got.Lease.Key != gb.Lease.Key {
			t.Errorf("an admin naming build-42 once only bob's is left: %+v, %v", got.Lease, err)
		}
		synctest.Wait()
		again := h.mustGrant(h.acquire("alice", contract.LeaseRequestInput{Platform: contract.PlatformIOS, LeaseID: "build-42"}))
		if again.Lease.ID != "build-42" || again.Lease.Key == ga.Lease.Key {
			t.Errorf("alice's next build-42: %+v, want a new key", again.Lease)
		}

		// Every lease is kept under its key; the events pair each grant with
		// its end by it.
		st.mu.Lock()
		defer st.mu.Unlock()
		for _, g := range []contract.LeaseGrant{ga, gb, again} {
			if _, ok := st.lease(g.Lease.Key); !ok {
				t.Errorf("no stored lease %s", g.Lease.Key)
			}
		}
		for _, ev := range st.storedEvents() {
			if ev.Event != "lease.granted" && ev.Event != "lease.released" && ev.Event != "lease.renewed" {
				continue
			}
			var p map[string]any
			_ = json.Unmarshal(ev.Payload, &p)
			if key, _ := p["leaseId"].(string); key == "build-42" || p["chosenLeaseId"] != "build-42" {
				t.Errorf("%s payload %v, want leaseId the key and chosenLeaseId build-42", ev.Event, p)
			}
		}
	})
}

func anyStrings(v any) []string {
	switch v := v.(type) {
	case []string:
		return v
	case []any:
		out := make([]string, 0, len(v))
		for _, s := range v {
			str, _ := s.(string)
			out = append(out, str)
		}
		return out
	}
	return nil
}

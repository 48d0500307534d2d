package e2e

import (
	"maps"
	"strings"
	"testing"
	"time"
)

// leaseIDsOf is GET /v1/leases as secret sees it: lease id → worker id.
func (f *fleet) leaseIDsOf(secret string) map[string]string {
	f.t.Helper()
	r := f.api.do("GET", "/v1/leases", secret, "")
	ls, ok := r.body["leases"].([]any)
	if r.status != 200 || !ok {
		f.t.Fatalf("GET /v1/leases on the gateway: %d %s", r.status, r.raw)
	}
	out := map[string]string{}
	for _, l := range ls {
		m, _ := l.(map[string]any)
		id, _ := m["id"].(string)
		w, _ := m["workerId"].(string)
		out[id] = w
	}
	return out
}

// Through the gateway, lease.list (GET /v1/leases) shows an agent exactly
// the gateway leases it owns, under their gateway ids, and an operator
// every connected worker's leases: the gateway's under their gateway ids,
// a worker's own as the worker names them, each with its workerId.
func TestTheGatewaysLeaseListShowsAnAgentItsOwnAndAnOperatorEveryLease(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	b := f.worker("lists", 3)
	idB := instanceID(t, b)
	f.await("the worker connected", 10*time.Second, connected(idB))

	_, alice := f.gw.token("agent", "alice")
	_, bob := f.gw.token("agent", "bob")
	_, operator := f.gw.token("operator", "ops")
	leaseOf := func(secret string) string {
		t.Helper()
		r := f.api.do("POST", "/v1/lease-requests", secret, `{"platform":"ios"}`)
		if r.status != 201 {
			t.Fatalf("create a lease request on the gateway: %d %s", r.status, r.raw)
		}
		l, _ := f.api.awaitState(secret, requestOf(t, r)["id"].(string), "granted")["lease"].(map[string]any)
		id, _ := l["id"].(string)
		if !strings.HasPrefix(id, idB+".") {
			t.Fatalf("the gateway granted lease id %q, want %s.<the worker's id>", id, idB)
		}
		return id
	}
	aliceLease, bobLease := leaseOf(alice), leaseOf(bob)
	local := b.leaseDetached("local-agent", "ios")

	if got := f.leaseIDsOf(alice); len(got) != 1 || got[aliceLease] != idB {
		t.Errorf("alice's lease list = %v, want only %s on %s", got, aliceLease, idB)
	}
	if got := f.leaseIDsOf(bob); len(got) != 1 || got[bobLease] != idB {
		t.Errorf("bob's lease list = %v, want only %s on %s", got, bobLease, idB)
	}
	f.await("the gateway's view of the worker's three leases", 5*time.Second, func(ws map[string]workerLine) bool { return ws[idB].Leases == 3 })
	want := map[string]string{aliceLease: idB, bobLease: idB, local.Lease.ID: idB}
	if got := f.leaseIDsOf(operator); !maps.Equal(got, want) {
		t.Errorf("the operator's lease list = %v, want the two gateway leases and the worker's own %s, each on %s", got, local.Lease.ID, idB)
	}
}

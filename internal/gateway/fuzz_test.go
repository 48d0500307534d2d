package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// Whatever a worker answers, the checks neither panic nor let through
// what the fleet's reads cannot take: an accepted status sums without
// surprise, and a relayed payload always ends up an object naming the
// worker the gateway says it came from.
func FuzzWorkerAnswers(f *testing.F) {
	f.Add([]byte(`{"daemon":{"version":"1","health":"running"},"host":{"cpus":2},"devices":[{"id":"d","spec":{"platform":"ios"},"state":"ready"}]}`), "w1")
	f.Add([]byte(`{"workerId":"forged","leaseId":"l1"}`), "w2")
	f.Add([]byte(`{"platforms":[{"platform":"android","models":["Pixel 9"],"runtimes":["36"]}]}`), "w3")
	f.Add([]byte(`[1,2,3]`), "")
	f.Fuzz(func(t *testing.T, data []byte, id string) {
		var s contract.Status
		if json.Unmarshal(data, &s) == nil && checkStatus(s) == nil {
			fl := New(Options{Store: newMemStore()})
			fl.put(contract.WorkerView{ID: "w", Connection: contract.WorkerConnected, Capacity: s.Capacity,
				Devices: tag(s.Devices, "w"), Leases: tagLeases(s.Leases, "w"), Waiting: tagWaiting(s.Waiting, "w")})
			snap := fl.Snapshot()
			if snap.Counts.Devices != len(s.Devices) || len(snap.Leases) != len(s.Leases) {
				t.Fatalf("an accepted status of %d devices, %d leases sums to %+v", len(s.Devices), len(s.Leases), snap.Counts)
			}
			for _, d := range snap.Devices {
				if d.WorkerID != "w" {
					t.Fatalf("device %q is not tagged with its worker", d.ID)
				}
			}
		}
		var cat contract.CatalogResult
		if json.Unmarshal(data, &cat) == nil && checkCatalog(cat) == nil {
			fl := New(Options{Store: newMemStore()})
			fl.put(contract.WorkerView{ID: "w", Connection: contract.WorkerConnected, Catalog: cat.Platforms})
			_ = fl.Catalog("")
		}
		// Ids come checked (contract.CheckWorkerID): an id it refuses never
		// reaches a relay.
		if contract.CheckWorkerID("id", id) != nil {
			return
		}
		if out, err := withWorkerID(data, id); err == nil {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(out, &obj); err != nil {
				t.Fatalf("withWorkerID(%q) = %q, not an object: %v", data, out, err)
			}
			var got string
			if err := json.Unmarshal(obj["workerId"], &got); err != nil || got != id {
				t.Fatalf("withWorkerID(%q, %q) names %q", data, id, got)
			}
		}
	})
}

// Whatever a worker's snapshot lists, it never adds a lease to the
// gateway's index nor changes whose one is: the leases the gateway granted
// keep their owner, requester and routing, another worker's are untouched,
// and the only change a snapshot makes is to end its own worker's leases
// it lacks (at the second miss).
func FuzzAWorkersSnapshotOnlyConfirmsOrEndsItsOwnGrants(f *testing.F) {
	f.Add("lse_a", "gw:ins_gw:agent-1", "tok_alice", "dev_lse_a", true, "build-42")
	f.Add("lse_lie", "gw:ins_gw:victim", "tok_victim", "dev_lse_b", false, "")
	f.Add("build-42", "gw:ins_gw:agent-2", "tok_bob", "dev_x", true, "build-42")
	f.Fuzz(func(t *testing.T, leaseID, requester, owner, device string, chosen bool, claimedChosen string) {
		x := newLeaseIndex("ins_gw")
		granted := []store.Grant{grantOf("w1", "lse_a", "agent-1", "tok_alice", "build-42"), grantOf("w2", "lse_b", "agent-2", "tok_bob", "")}
		x.load(granted, time.Time{})
		before := map[string]indexed{}
		for k, e := range x.byKey {
			before[k] = *e
		}
		snapshot := []contract.LeaseRecord{{ID: leaseID, RequesterID: requester, OwnerID: owner, DeviceID: device, IDChosenByRequester: chosen}}
		if claimedChosen != "" {
			snapshot = append(snapshot, contract.LeaseRecord{ID: claimedChosen, RequesterID: requester, OwnerID: owner, DeviceID: device, IDChosenByRequester: true})
		}
		for range 3 {
			x.reconcile("w1", statusRead{leases: snapshot, gen: 1}, time.Unix(0, 0))
		}
		for k, e := range x.byKey {
			b, ok := before[k]
			if !ok {
				t.Fatalf("the snapshot added %s to the index: %+v", k, *e)
			}
			if e.owner != b.owner || e.requester != b.requester || e.workerID != b.workerID || e.workerLeaseID != b.workerLeaseID || e.id != b.id {
				t.Fatalf("the snapshot changed %s from %+v to %+v", k, b, *e)
			}
		}
		if _, ok := x.byKey["w2.lse_b"]; !ok {
			t.Fatal("w1's snapshot ended w2's lease")
		}
		for r, e := range x.byRequester {
			if e.requester != r || (r != "agent-1" && r != "agent-2") {
				t.Fatalf("the snapshot gave requester %q a lease: %+v", r, *e)
			}
		}
		for id, of := range x.byChosen {
			for o, e := range of {
				if id != "build-42" || o != "tok_alice" || e.key != "w1.lse_a" {
					t.Fatalf("the snapshot gave %q's chosen id %q to %s", o, id, e.key)
				}
			}
		}
	})
}

package gateway

import (
	"encoding/json"
	"testing"

	"github.com/simlock/simlock/internal/contract"
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

package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// BenchmarkCommitRows takes a warm grant's commit apart: the whole of it
// (the device leased, the lease, the request settled, three events that
// usage folds), then without each kind of row, then each kind alone, and
// the floor (a renewal's rows). Beside the time it reports the WAL pages
// a commit writes (pages/op): in WAL mode with synchronous=NORMAL a commit
// costs about a fixed part (BEGIN, COMMIT, the WAL's locks) and a part per
// page it appends, so the pages are what a change of rows or schema moves.
func BenchmarkCommitRows(b *testing.B) {
	type rows struct {
		device, lease, request, usage bool
		events                        int
	}
	for _, c := range []struct {
		name string
		rows rows
	}{
		{"grant", rows{true, true, true, true, 3}},
		{"grant/events-usage-ignores", rows{true, true, true, false, 3}},
		{"grant/no-request", rows{true, true, false, true, 3}},
		{"grant/one-event", rows{true, true, true, true, 1}},
		{"device", rows{device: true}},
		{"lease", rows{lease: true}},
		{"request", rows{request: true}},
		{"events-3", rows{events: 3}},
		{"events-1", rows{events: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			db, path := openTemp(b)
			ctx := context.Background()
			dev := store.Device{ID: "dev_1", Platform: contract.PlatformAndroid, Model: "Pixel", OSVersion: "16",
				Driver: "demo", DriverDeviceID: "x", State: contract.DeviceReady, CreatedAt: 1}
			commit(b, db, store.Change{Devices: []store.Device{dev}})
			payload := json.RawMessage(`{"leaseId":"lse_0123456789abcdef","deviceId":"dev_1","requester":"agent-1","requestId":"req_0123456789abcdef","source":"warm","platform":"android"}`)
			names := []string{contract.EvLeaseRequested, contract.EvLeaseGranted, contract.EvCapacityChanged}
			if !c.rows.usage {
				names = []string{"bench.a", "bench.b", "bench.c"}
			}
			i := 0
			one := func() {
				i++
				id := fmt.Sprintf("%016x", i)
				var ch store.Change
				if c.rows.device {
					was := dev
					dev.State, dev.StateSince = contract.DeviceLeased, int64(i)
					if i%2 == 0 {
						dev.State = contract.DeviceReady
					}
					ch.Devices, ch.Before.Devices = []store.Device{dev}, map[string]store.Device{dev.ID: was}
				}
				l := store.Lease{LeaseRecord: contract.LeaseRecord{ID: "lse_" + id, DeviceID: dev.ID, RequesterID: "agent-" + id,
					OwnerID: "agent-" + id, GrantedAt: int64(i), TTLMs: 60_000, TTLDeadline: int64(i) + 60_000}}
				if c.rows.lease {
					ch.Leases = []store.Lease{l}
				}
				if c.rows.request {
					g := contract.LeaseGrant{Lease: l.LeaseRecord, Environment: map[string]string{"SIMLOCK_DEMO": "1"}}
					ch.Requests = []contract.LeaseRequestRecord{{ID: "req_" + id, RequesterID: l.RequesterID, OwnerID: l.OwnerID,
						State: contract.RequestGranted, Grant: &g, LeaseID: l.ID}}
				}
				for k := range c.rows.events {
					ch.Events = append(ch.Events, store.NewEvent{ID: fmt.Sprintf("evt_%d%s", k, id), Timestamp: int64(i), Event: names[k], Payload: payload})
				}
				commit(b, db, ch)
			}
			for range 100 { // prepares the statements, grows the tables
				one()
			}
			// Pages: the WAL's growth over a run short enough that no
			// checkpoint restarts it.
			if _, err := db.w.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
				b.Fatal(err)
			}
			const counted = 50
			for range counted {
				one()
			}
			st, err := os.Stat(path + "-wal")
			if err != nil {
				b.Fatal(err)
			}
			const walHeader, frame = 32, 4096 + 24
			pages := float64(st.Size()-walHeader) / frame / counted
			b.ResetTimer()
			for b.Loop() {
				one()
			}
			b.ReportMetric(pages, "pages/op")
		})
	}
}

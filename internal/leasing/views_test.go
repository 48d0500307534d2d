package leasing

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

func TestASummaryCountsWhatTheFullSnapshotLists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(3))
		for i := range 3 {
			h.mustGrant(h.acquire(fmt.Sprintf("a%d", i), ios))
		}
		waiter := h.acquire("w", ios)
		synctestWaitQueued(t, waiter)
		full, sum := h.e.Snapshot(false), h.e.Snapshot(true)
		if sum.Devices != nil || sum.Leases != nil || sum.Waiting != nil {
			t.Fatalf("a summary carries lists: %d devices, %d leases, %d waiting", len(sum.Devices), len(sum.Leases), len(sum.Waiting))
		}
		if len(full.Devices) != 3 || len(full.Leases) != 3 || len(full.Waiting) != 1 {
			t.Fatalf("full snapshot: %d devices, %d leases, %d waiting; want 3, 3, 1", len(full.Devices), len(full.Leases), len(full.Waiting))
		}
		want := contract.StatusCounts{Devices: 3, Leases: 3, Waiting: 1, DevicesByState: map[contract.DeviceState]int{contract.DeviceLeased: 3}}
		if c := sum.Counts; c.Devices != want.Devices || c.Leases != want.Leases || c.Waiting != want.Waiting ||
			len(c.DevicesByState) != 1 || c.DevicesByState[contract.DeviceLeased] != 3 {
			t.Fatalf("summary counts %+v, want %+v", c, want)
		}
		if sum.QueueDepth != 1 || full.Capacity.Global.Running != 3 || sum.Capacity.Global != full.Capacity.Global {
			t.Fatalf("queue depth %d, capacity %+v / %+v", sum.QueueDepth, sum.Capacity, full.Capacity)
		}
	})
}

func TestAnAgentsListsHoldOnlyItsOwnLeasesAndRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		mine := h.mustGrant(h.acquire("alice", ios))
		theirs := h.mustGrant(h.acquire("bob", ios))
		synctestWaitQueued(t, h.acquire("carol", ios))
		b, snap := h.e.AppendLists([]byte("{"), Caller{Principal: "alice"})
		var enc struct {
			Devices []contract.Device      `json:"devices"`
			Leases  []contract.LeaseRecord `json:"leases"`
		}
		if err := json.Unmarshal(append(b, '}'), &enc); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if len(enc.Leases) != 1 || enc.Leases[0].ID != mine.Lease.ID {
			t.Fatalf("alice's leases %+v, want only %s", enc.Leases, mine.Lease.ID)
		}
		if len(snap.Waiting) != 0 {
			t.Fatalf("alice sees carol's request: %+v", snap.Waiting)
		}
		if snap.Counts.Leases != 2 || snap.Counts.Waiting != 1 {
			t.Fatalf("counts %+v, want every lease and request counted", snap.Counts)
		}
		for _, d := range enc.Devices {
			if d.LeaseID == theirs.Lease.ID {
				t.Fatalf("device %s names bob's lease to alice", d.ID)
			}
			if d.ID == mine.Device.ID && d.LeaseID != mine.Lease.ID {
				t.Fatalf("alice's own device %s shows lease %q, want %s", d.ID, d.LeaseID, mine.Lease.ID)
			}
		}
		if len(enc.Devices) != 2 {
			t.Fatalf("alice sees %d devices, want both", len(enc.Devices))
		}
	})
}

// synctestWaitQueued waits until p has been told it is queued.
func synctestWaitQueued(t *testing.T, p *pending) {
	t.Helper()
	synctest.Wait()
	for _, s := range p.stages() {
		if s.Stage == contract.StageQueued {
			return
		}
	}
	t.Fatalf("not queued: %+v", p.stages())
}

func TestPagesCoverEveryRecordOnceAndResumeAfterAVanishedCursor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(7))
		var grants []contract.LeaseGrant
		for i := range 7 {
			grants = append(grants, h.mustGrant(h.acquire(fmt.Sprintf("a%d", i), ios)))
		}
		seen := map[string]int{}
		var after *contract.ListCursor
		pages := 0
		for {
			page, next := h.e.leasesPage(Caller{Admin: true}, after, 3)
			pages++
			for _, l := range page {
				seen[l.ID]++
			}
			if next == "" {
				break
			}
			c, err := contract.ParseListCursor(next)
			if err != nil {
				t.Fatal(err)
			}
			after = &c
			if pages == 1 {
				// The page's last lease ends before the next page is read.
				h.release(page[2].OwnerID, page[2].ID)
			}
		}
		if pages != 3 || len(seen) != 7 {
			t.Fatalf("%d pages covering %d leases, want 3 pages and all 7", pages, len(seen))
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("lease %s listed %d times", id, n)
			}
		}
		all, _ := h.e.devicesPage(nil, 0)
		first, next := h.e.devicesPage(nil, 4)
		c, _ := contract.ParseListCursor(next)
		rest, last := h.e.devicesPage(&c, 4)
		if len(first) != 4 || len(rest) != 3 || last != "" || rest[0].ID != all[4].ID {
			t.Fatalf("device pages %d + %d (next %q), want 4 + 3 in list order", len(first), len(rest), last)
		}
	})
}

func TestTheEncodedSnapshotFollowsEveryChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(3))
		same := func(what string) {
			t.Helper()
			b, _ := h.e.AppendLists([]byte("{"), Caller{Admin: true})
			typed := h.e.Snapshot(false)
			var enc struct {
				Devices []contract.Device      `json:"devices"`
				Leases  []contract.LeaseRecord `json:"leases"`
			}
			if err := json.Unmarshal(append(b, '}'), &enc); err != nil {
				t.Fatalf("%s: %s: %v", what, b, err)
			}
			devs, leases := enc.Devices, enc.Leases
			if !reflect.DeepEqual(nonNilDevices(devs), typed.Devices) || !reflect.DeepEqual(nonNilLeases(leases), typed.Leases) {
				t.Fatalf("%s: encoded\n%+v\n%+v\nwant\n%+v\n%+v", what, devs, leases, typed.Devices, typed.Leases)
			}
		}
		same("empty")
		g := h.mustGrant(h.acquire("a", ios))
		same("after a grant")
		time.Sleep(time.Second)
		if _, err := h.e.Renew(Caller{Principal: "a"}, contract.LeaseRenewInput{LeaseID: g.Lease.ID}); err != nil {
			t.Fatal(err)
		}
		same("after a renewal")
		h.release("a", g.Lease.ID)
		same("after the release")
		synctest.Wait()
		h.e.wait()
		same("after the clean")
	})
}

func nonNilDevices(d []contract.Device) []contract.Device {
	if d == nil {
		return []contract.Device{}
	}
	return d
}

func nonNilLeases(l []contract.LeaseRecord) []contract.LeaseRecord {
	if l == nil {
		return []contract.LeaseRecord{}
	}
	return l
}

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shirou/gopsutil/v4/mem"
)

// requestsFrom counts the lease.request calls a worker took for requester
// through the gateway: each is one lease.requested on its log.
func requestsFrom(t *testing.T, w *home, requester string) int {
	t.Helper()
	n := 0
	for _, ev := range events(t, w) {
		if ev.Event == "lease.requested" && strings.HasPrefix(ev.str("requester"), "gw:") && strings.HasSuffix(ev.str("requester"), ":"+requester) {
			n++
		}
	}
	return n
}

// A worker whose RAM budget stops it before its slot count refuses a
// request that would need a new device (NO_CAPACITY, before any
// progress). Its capacity line says so (atRamBudget), so the gateway does
// not send it the waiting request again and again: at most 10
// lease.request calls in the 10 s the request waits, counted on the
// worker's own event log.
func TestAWorkerAtItsRAMBudgetIsNotSentARequestItWouldRefuse(t *testing.T) {
	t.Parallel()
	vm, err := mem.VirtualMemory()
	if err != nil || vm.Total < 6<<30 {
		t.Skipf("the host's RAM (%v, %v) leaves no budget for one device past the 4 GiB the resource strategy keeps", vm, err)
	}
	// One iOS device takes the whole budget; the slots allow three.
	perDevice := int64(vm.Total) - 4<<30
	f := newFleet(t)
	w := f.worker("ram-bound", 3, "capacity.strategy", "resource",
		"capacity.config.limits.ios.maxDevices", "3", "capacity.config.limits.ios.maxRunning", "3",
		"capacity.config.limits.maxRunning", "3", "capacity.config.ramBudget.iosBytesPerDevice", fmt.Sprint(perDevice))
	f.await("the worker connected", 10*time.Second, connected(instanceID(t, w)))
	f.gw.leaseDetached("holder", "ios")
	start := time.Now()
	r := f.gw.run("lease", "--platform", "ios", "--agent-id", "waiter", "--detach", "--timeout", "10s")
	if r.code != 10 {
		t.Fatalf("the waiting request, with no room in the fleet: exit %d, want 10 (QUEUE_TIMEOUT after 10 s)\n%s", r.code, r)
	}
	if waited := time.Since(start); waited < 10*time.Second {
		t.Fatalf("the request gave up after %s, want its 10 s", waited)
	}
	switch n := requestsFrom(t, w, "waiter"); {
	case n > 10:
		t.Errorf("the worker at its RAM budget took %d lease.request calls for one request waiting 10 s, want at most 10", n)
	case n > 1:
		// One may go before the gateway reads the view the holder's
		// grant made; after that the view says atRamBudget.
		t.Errorf("the worker took %d lease.request calls while its view said atRamBudget, want at most 1 (routing sent what it would refuse, and only the backoff bounded it)", n)
	}
}

// grantRecorded is the gateway's grant.recorded for requester, if any.
func grantRecorded(t *testing.T, gw *home, requester string) (event, bool) {
	t.Helper()
	for _, ev := range events(t, gw) {
		if ev.Event == "grant.recorded" && ev.str("requesterId") == requester {
			return ev, true
		}
	}
	return event{}, false
}

// Worker A is full of model X (iOS 26.4, which only A has: B never
// downloads), worker B idle. A request for X waits, passed over; a plain
// request after it is granted by B at once (within 1 s of its own
// arrival, by the gateway's record), not held behind it. When A frees its
// device, the X request gets it, before a later plain request waiting for
// the same room.
func TestARequestOnlyAFullWorkerServesIsPassedOverAndServedFirstWhenItFrees(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := f.worker("worker-a", 1, "drivers.demo.downloadMs", "50")
	b := f.worker("worker-b", 1, "downloads.policy", "never")
	idA, idB := instanceID(t, a), instanceID(t, b)
	f.await("both workers connected", 10*time.Second, connected(idA, idB))

	// A downloads 26.4 for a local holder, which keeps A's one slot.
	local := a.leaseDetached("local", "ios", "--os", "26.4", "--allow-download")
	// The gateway learns of the new runtime from A's catalog.changed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := f.gw.run("catalog", "--platform", "ios", "--json")
		var cat struct {
			Platforms []struct {
				RuntimeWorkers map[string][]string `json:"runtimeWorkers"`
			} `json:"platforms"`
		}
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &cat) == nil && len(cat.Platforms) == 1 &&
			slices.Contains(cat.Platforms[0].RuntimeWorkers["26.4"], idA) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway's catalog never showed 26.4 on A after A installed it\n%s", r)
		}
		time.Sleep(pollEvery)
	}

	x := f.gw.start("lease", "--platform", "ios", "--os", "26.4", "--agent-id", "agent-x", "--detach", "--progress", "json", "--timeout", "15s")
	x.waitLine(x.stderr, "agent-x queued", func(s string) bool { return strings.Contains(s, `"stage":"queued"`) })
	r := f.gw.run("lease", "--platform", "ios", "--agent-id", "agent-plain", "--detach", "--timeout", "5s")
	if r.code != 0 {
		t.Fatalf("a plain request behind the request for X, with B idle: exit %d, want granted by B\n%s", r.code, r)
	}
	plain := parseGrant(t, strings.TrimSpace(r.stdout))
	if !strings.HasPrefix(plain.Lease.ID, idB+".") {
		t.Errorf("the plain request was granted %s, want a lease on B (%s)", plain.Lease.ID, idB)
	}
	ev, ok := grantRecorded(t, f.gw, "agent-plain")
	if wait, _ := ev.Payload["waitMs"].(float64); !ok || wait > 1000 {
		t.Errorf("the plain request waited %v ms from its arrival to its grant (recorded %v), want at most 1000: held behind the request for X", ev.Payload["waitMs"], ok)
	}

	// Both workers full now: a second plain request waits for the same
	// room X does, and arrived after it.
	later := f.gw.start("lease", "--platform", "ios", "--agent-id", "agent-later", "--detach", "--progress", "json")
	later.waitLine(later.stderr, "agent-later queued", func(s string) bool { return strings.Contains(s, `"stage":"queued"`) })
	if r := a.run("release", local.Lease.ID); r.code != 0 {
		t.Fatalf("release on A\n%s", r)
	}
	if code := x.wait(); code != 0 {
		t.Fatalf("the request for X, once A freed its device: exit %d\n%s", code, x.dump())
	}
	xg := parseGrant(t, strings.TrimSpace(x.stdout.text()))
	if !strings.HasPrefix(xg.Lease.ID, idA+".") {
		t.Errorf("the request for X was granted %s, want A's freed device", xg.Lease.ID)
	}
	if _, ok := grantRecorded(t, f.gw, "agent-later"); ok {
		t.Errorf("the later plain request was granted too, with one device freed: it took the room the earlier request was waiting for")
	}
	later.kill()
}

// A worker whose view offers room and that refuses every request before
// any progress (its RAM budget, a runtime removed: what the gateway cannot
// see) is a stale view that does not change: the gateway backs off from
// it, and one request waiting 10 s sends it at most 10 lease.request calls
// (it once sent hundreds a second), whatever the code of the refusal.
func TestAWorkerThatRefusesEveryRequestIsAskedAFewTimesNotInALoop(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"NO_CAPACITY", "RUNTIME_MISSING"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			f := newFleet(t)
			w := f.fakeJoined("fake-refuser", "ios", 2, 2)
			start := time.Now()
			ch := f.gw.runAsync("lease", "--platform", "ios", "--agent-id", "refused", "--detach", "--timeout", "10s")
			calls := 0
			for {
				c, r, placed := nextOr(w, "lease.request", ch)
				if !placed {
					if r.code != 10 {
						t.Fatalf("the request no worker would grant: exit %d, want 10 (QUEUE_TIMEOUT)\n%s", r.code, r)
					}
					break
				}
				calls++
				w.refuse(c, code, "refused before any progress")
			}
			if waited := time.Since(start); waited < 10*time.Second {
				t.Fatalf("the request gave up after %s, want its 10 s", waited)
			}
			if calls > 10 {
				t.Errorf("a worker refusing with %s took %d lease.request calls for one request waiting 10 s, want at most 10", code, calls)
			}
			if calls < 2 {
				t.Errorf("a worker refusing with %s was asked %d times in 10 s: the stale view was never tried again", code, calls)
			}
			t.Logf("%s: %d lease.request calls in %s", code, calls, time.Since(start).Round(time.Millisecond))
		})
	}
}

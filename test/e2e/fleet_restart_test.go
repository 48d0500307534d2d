package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// After a gateway is killed and started again, every lease it granted is
// usable: while its worker is not back yet renew, get, release and the
// HTTP request view say WORKER_UNREACHABLE (never UNKNOWN_LEASE, never
// "active": false), and once it is back the lease renews under the same
// id. The workers redial quickly enough that all are back within 5 s.
func TestAfterAGatewayRestartEveryLeaseRenewsAndEveryWorkerIsBackWithinFiveSeconds(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	ws := []*home{f.worker("worker-a", 2), f.worker("worker-b", 1), f.worker("worker-c", 1)}
	var ids []string
	for _, w := range ws {
		ids = append(ids, instanceID(t, w))
	}
	f.await("three workers connected", 10*time.Second, connected(ids...))
	holders := []string{"holder-a", "holder-b"}
	leases := map[string]string{}
	for _, h := range holders {
		leases[h] = f.gw.leaseDetached(h, "ios").Lease.ID
	}
	toRelease, released := f.gw.leaseDetached("releaser", "ios").Lease.ID, ""
	_, agent := f.gw.token("agent", "http-holder")
	r := f.api.do("POST", "/v1/lease-requests", agent, `{"platform":"ios"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	reqID := requestOf(t, r)["id"].(string)
	granted := f.api.awaitState(agent, reqID, "granted")
	httpLease, _ := granted["lease"].(map[string]any)["id"].(string)
	if httpLease == "" {
		t.Fatalf("the granted request names no lease: %v", granted)
	}
	// Five restarts in a row: a worker's redial delay must not grow with
	// each (it would pass 5 s by the fourth if it doubled).
	for round := 1; round <= 5; round++ {
		if err := syscall.Kill(lockPID(f.gw.Dir), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if !waitLockFree(f.gw.Dir, 10*time.Second) {
			t.Fatal("the gateway still holds its lock 10 s after SIGKILL")
		}
		f.gw.startDaemon()
		started := time.Now()
		// One lease per requester, fleet-wide, whether its worker is back
		// or not.
		expectFailure(t, f.gw.run("lease", "--platform", "ios", "--agent-id", holders[0], "--detach", "--no-wait"), 13, "REQUESTER_ALREADY_LEASED")

		// Until every worker is back, each lease answers either as itself or
		// WORKER_UNREACHABLE; never as a lease the gateway does not know.
		unreachable := 0
		for {
			back := connected(ids...)(f.workers())
			for _, h := range holders {
				r := f.gw.run("lease", "renew", "--agent-id", h, leases[h])
				if r.code != 0 {
					code := cliError(t, r)["code"]
					if code != "WORKER_UNREACHABLE" {
						t.Fatalf("round %d: renew of %s %s after the gateway restarted: %v, want it renewed or WORKER_UNREACHABLE\n%s", round, leases[h], time.Since(started), code, r)
					}
					unreachable++
				}
			}
			v := f.api.do("GET", "/v1/lease-requests/"+reqID, agent, "")
			if l, _ := requestOf(t, v)["lease"].(map[string]any); v.status != 200 || l == nil || l["active"] == false {
				t.Fatalf("the HTTP request view of a held lease after the gateway restarted reads %d %s, want its lease, not inactive", v.status, v.raw)
			}
			if g := f.api.do("GET", "/v1/leases/"+httpLease, agent, ""); g.status != 200 && g.errCode() != "WORKER_UNREACHABLE" {
				t.Fatalf("HTTP get of %s after the gateway restarted: %d %s", httpLease, g.status, g.raw)
			}
			if rr := f.api.do("POST", "/v1/leases/"+httpLease+"/renew", agent, ""); rr.status != 200 && rr.errCode() != "WORKER_UNREACHABLE" {
				t.Fatalf("HTTP renew of %s after the gateway restarted: %d %s", httpLease, rr.status, rr.raw)
			}
			// The demo driver runs no command: a worker that is back
			// refuses it; one that is away is unreachable.
			if x := f.api.exec(agent, httpLease, `{"tool":"simctl","args":["list"]}`); x.code != "PASSTHROUGH_REFUSED" && x.code != "WORKER_UNREACHABLE" {
				t.Fatalf("round %d: HTTP exec on %s after the gateway restarted: %d %s %q", round, httpLease, x.status, x.code, x.message)
			}
			if round == 5 && released == "" {
				r := f.gw.run("release", "--agent-id", "releaser", toRelease)
				switch {
				case r.code == 0:
					released = "released"
				case cliError(t, r)["code"] != "WORKER_UNREACHABLE":
					t.Fatalf("release of %s after the gateway restarted\n%s", toRelease, r)
				default:
					released = "unreachable"
				}
			}
			if back {
				break
			}
			if time.Since(started) > 5*time.Second {
				t.Fatalf("round %d: the workers were not all back within 5 s of the gateway's start: %+v", round, f.workers())
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("round %d: all workers back %s after the gateway started; %d renewals answered WORKER_UNREACHABLE meanwhile", round, time.Since(started).Round(time.Millisecond), unreachable)
	}
	for _, h := range holders {
		if r := f.gw.run("lease", "renew", "--agent-id", h, leases[h]); r.code != 0 {
			t.Errorf("renew of %s once its worker is back\n%s", leases[h], r)
		}
	}
	if rr := f.api.do("POST", "/v1/leases/"+httpLease+"/renew", agent, ""); rr.status != 200 {
		t.Errorf("HTTP renew of %s once its worker is back: %d %s", httpLease, rr.status, rr.raw)
	}
	t.Logf("the release while the workers came back: %s", released)
	if released == "unreachable" {
		if r := f.gw.run("release", "--agent-id", "releaser", toRelease); r.code != 0 {
			t.Errorf("release of %s, WORKER_UNREACHABLE while its worker was away, once it is back\n%s", toRelease, r)
		}
	}
	// One lease per requester holds across the restart.
	for _, h := range holders {
		expectFailure(t, f.gw.run("lease", "--platform", "ios", "--agent-id", h, "--detach"), 13, "REQUESTER_ALREADY_LEASED")
	}
	// The end of a lease granted before the restarts is counted, by its
	// platform, as the gateway's metrics count their own grants' ends.
	if r := f.gw.run("release", "--agent-id", "holder-a", leases["holder-a"]); r.code != 0 {
		t.Fatalf("release of %s\n%s", leases["holder-a"], r)
	}
	const ended = `simlock_lease_ends_total{platform="ios",reason="explicit"} `
	var scraped string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		scraped = f.gw.run("metrics").stdout
		if strings.Contains(scraped, ended) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the release of a lease granted before the restarts, the gateway's metrics count no ios end:\n%s", scraped)
		}
	}
}

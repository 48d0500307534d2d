package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// `simlock events --follow` shows a lease's life in order, and its history
// and live parts join with no duplicate and no gap.
func TestEventsFollow(t *testing.T) {
	t.Parallel()
	h := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "2"}, fastDemo...)...)

	// History for the follower to replay.
	warm := h.leaseDetached("warm", "ios")
	if r := h.run("release", warm.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}

	f := h.follow()
	f.find("the replayed release of the first lease", isEvent("lease.released", "leaseId", warm.Lease.ID))

	g := h.leaseDetached("e", "ios")
	if r := h.run("release", g.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	released := f.next("lease.released of the second lease", isEvent("lease.released", "leaseId", g.Lease.ID))

	requested := f.find("lease.requested", isEvent("lease.requested", "requestId", g.RequestID, "requester", "e"))
	granted := f.find("lease.granted", isEvent("lease.granted", "leaseId", g.Lease.ID))
	if granted.str("requestId") != g.RequestID || granted.str("deviceId") != g.Device.ID {
		t.Errorf("lease.granted payload does not match the grant (request %s, device %s): %+v", g.RequestID, g.Device.ID, granted)
	}
	if !(requested.Seq < granted.Seq && granted.Seq < released.Seq) {
		t.Errorf("want lease.requested < lease.granted < lease.released, got seqs %d, %d, %d",
			requested.Seq, granted.Seq, released.Seq)
	}
	if released.str("reason") != "explicit" {
		t.Errorf("lease.released reason = %q, want explicit", released.str("reason"))
	}
	checkJoin(t, "the first follower", f.events)

	// More followers start while a client renews a lease as fast as the
	// daemon answers, so events are published while each follower reads
	// its history: the join must still show each event once, with no gap.
	burst := h.leaseDetached("burst", "android", "--ttl", "10m")
	stop := make(chan struct{})
	const loops = 3
	renewed := make(chan error, loops)
	for range loops {
		go func() { renewed <- renewLoop(h, "burst", burst.Lease.ID, stop) }()
	}
	var followers []*follower
	for range 5 {
		followers = append(followers, h.follow())
	}
	close(stop)
	for range loops {
		if err := <-renewed; err != nil {
			t.Fatalf("renewing in a loop: %v", err)
		}
	}
	if r := h.run("release", burst.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	for i, f := range followers {
		f.next("lease.released of the renewed lease", isEvent("lease.released", "leaseId", burst.Lease.ID))
		renewals := 0
		for _, ev := range f.events {
			if isEvent("lease.renewed", "leaseId", burst.Lease.ID)(ev) {
				renewals++
			}
		}
		if renewals == 0 {
			t.Errorf("follower %d saw no renewal", i+2)
		}
		t.Logf("follower %d: %d events, %d renewals", i+2, len(f.events), renewals)
		checkJoin(t, fmt.Sprintf("follower %d", i+2), f.events)
	}
}

// renewLoop renews a lease on its own session, one call after another,
// until stop is closed.
func renewLoop(h *home, principal, leaseID string, stop <-chan struct{}) error {
	c, err := net.Dial("unix", h.path("daemon.sock"))
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(waitBound)); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	roundTrip := func(req string) error {
		if _, err := io.WriteString(c, req+"\n"); err != nil {
			return err
		}
		resp, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.Contains(resp, `"result"`) {
			return fmt.Errorf("%s: %s", req, resp)
		}
		return nil
	}
	if err := roundTrip(`{"id":"h","op":"hello","input":{"protocol":{"min":1,"max":1},"principal":"` + principal + `"}}`); err != nil {
		return err
	}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := roundTrip(fmt.Sprintf(`{"id":%d,"op":"lease.renew","input":{"leaseId":%q}}`, i, leaseID)); err != nil {
			return err
		}
	}
}

// `simlock events --follow` outlives a daemon restart: once a daemon
// answers again it goes on from the last event it printed, with the events
// committed meanwhile, none twice and none skipped, and says so on stderr.
func TestEventsFollowOutlivesADaemonRestart(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	f := h.follow()
	before := h.leaseDetached("a", "ios")
	f.next("the grant before the restart", isEvent("lease.granted", "leaseId", before.Lease.ID))
	if r := h.run("release", before.Lease.ID); r.code != 0 {
		t.Fatalf("release\n%s", r)
	}
	if r := h.run("daemon", "stop"); r.code != 0 {
		t.Fatalf("daemon stop\n%s", r)
	}
	// Any command starts the daemon again; the follower does not.
	after := h.leaseDetached("b", "ios")
	f.next("the grant after the restart", isEvent("lease.granted", "leaseId", after.Lease.ID))
	if !f.p.running() {
		t.Fatalf("events --follow ended at the restart\n%s", f.p.dump())
	}
	checkJoin(t, "the follower across the restart", f.events)
	f.p.waitLine(f.p.stderr, "the notice that the stream is followed again", func(s string) bool {
		return strings.Contains(s, "following again from seq")
	})
}

// checkJoin checks that seqs strictly increase with no gap and no event id
// repeats.
func checkJoin(t *testing.T, who string, evs []event) {
	t.Helper()
	ids := map[string]int64{}
	for i, ev := range evs {
		if prev, dup := ids[ev.ID]; dup {
			t.Errorf("%s printed event %s twice (seq %d and %d)", who, ev.ID, prev, ev.Seq)
		}
		ids[ev.ID] = ev.Seq
		if i == 0 {
			continue
		}
		switch last := evs[i-1].Seq; {
		case ev.Seq <= last:
			t.Errorf("%s: seq %d (%s) follows seq %d", who, ev.Seq, ev.Event, last)
		case ev.Seq != last+1:
			t.Errorf("%s skipped seqs %d..%d before %s", who, last+1, ev.Seq-1, ev.Event)
		}
	}
}

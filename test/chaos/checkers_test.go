package chaos

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// The fleet run's checkers are code too: these tests (not opt-in) show each
// one flags what it is for and passes what is correct.

func TestPeakIsTheMostWithinAnyOneSecond(t *testing.T) {
	for _, tc := range []struct {
		ts   []int64
		n    int
		from int64
	}{
		{nil, 0, 0},
		{[]int64{5}, 1, 5},
		{[]int64{0, 999, 1000, 1998}, 3, 999},
		{[]int64{3000, 100, 1100, 1200, 1300, 2099}, 4, 1100},
	} {
		if n, from := peak(tc.ts); n != tc.n || from != tc.from {
			t.Errorf("peak(%v) = %d from %d, want %d from %d", tc.ts, n, from, tc.n, tc.from)
		}
	}
}

func TestAWorkersOwnIDsAreFoundInAnswersAndTheGatewaysKeysAreNot(t *testing.T) {
	for _, tc := range []struct {
		answer any
		leak   string // "" when the answer is clean
	}{
		{`{"lease":{"id":"ins_0123.lse_9c3190a721b0cec6"}}`, ""},
		{contract.LeaseRecord{ID: "ins_0123.lse_9c3190a721b0cec6", RequesterID: "agent-1"}, ""},
		{`{"device":{"leaseId":"lse_9c3190a721b0cec6"}}`, "lse_9c3190a721b0cec6"},
		{contract.Errorf(contract.CodeRequesterAlreadyLeased, "requester gw:ins_77:agent-1 already holds lease lse_ab12"), "gw:ins_77:agent-1"},
		{contract.Errorf(contract.CodeUnknownLease, "no lease").With("leaseId", "lse_ab12"), "lse_ab12"},
		{"lease lse_ab12 is gone", "lse_ab12"},
	} {
		l := newLedger()
		(&fleetRun{l: l}).scan("agent-1", "an answer", tc.answer)
		found := l.found()
		switch {
		case tc.leak == "" && len(found) > 0:
			t.Errorf("%v: flagged %v, want nothing", tc.answer, found)
		case tc.leak != "" && (len(found) == 0 || !strings.Contains(found[0], tc.leak) || checkOf(found[0]) != checkWorkerIDs):
			t.Errorf("%v: flagged %v, want %s under %s", tc.answer, found, tc.leak, checkWorkerIDs)
		}
	}
}

func TestAnAnswerPastItsDeadlineIsFlaggedUnlessTheGatewayWasDownMeanwhile(t *testing.T) {
	l := newLedger()
	f := &fleetRun{l: l}
	now := time.Now()
	if f.pastDeadline("a", "on time", now.Add(-3*time.Second), now.Add(-3*time.Second), 2000) {
		t.Error("an answer 3s after a request of timeoutMs 2000 was flagged: within the slack")
	}
	if !f.pastDeadline("a", "late", now.Add(-5*time.Second), now.Add(-5*time.Second), 2000) || checkOf(l.found()[0]) != checkDeadline {
		t.Errorf("an answer 5s after a request of timeoutMs 2000 was not flagged: %v", l.found())
	}
	f.down = append(f.down, window{from: now.Add(-4 * time.Second), to: now.Add(-3 * time.Second)})
	if f.pastDeadline("a", "excused", now.Add(-5*time.Second), now.Add(-5*time.Second), 2000) {
		t.Error("an answer late because the gateway was stopped meanwhile was flagged")
	}
	// An HTTP read sent 5s after its request and finding it open is late,
	// however long the read itself took.
	if !f.pastDeadline("a", "read late", now.Add(-20*time.Second), now.Add(-15*time.Second), 2000) {
		t.Error("a read that found a request open 5s after it was made was not flagged")
	}
}

func TestALeaseGoneUntoldIsFlaggedAndOneItsHolderWasToldOfIsNot(t *testing.T) {
	l := newLedger()
	deadline := time.Now().Add(time.Minute).UnixMilli()
	l.granted("a", "w.lse_1", "dev_1", deadline)
	l.granted("b", "w.lse_2", "dev_2", deadline)
	l.told("w.lse_2")
	l.vanished("w.lse_1", "renew: UNKNOWN_LEASE")
	l.vanished("w.lse_2", "renew: UNKNOWN_LEASE")
	found := l.found()
	if len(found) != 1 || checkOf(found[0]) != checkLeaseLost || !strings.Contains(found[0], "w.lse_1") {
		t.Errorf("violations %v, want one %s for w.lse_1 only", found, checkLeaseLost)
	}
}

// A gateway restart excuses a request's DAEMON_STOPPING when the restart
// ended after the agent heard of the request, though the kill began
// before it (the answer was in flight); one that was over before does not.
func TestARestartExcusesTheRequestsItCouldHaveLost(t *testing.T) {
	t0 := time.Unix(1000, 0)
	fr := &fleetRun{}
	fr.down = []window{{from: t0, to: t0.Add(100 * time.Millisecond), restart: true}}
	if !fr.restartedSince(t0.Add(10 * time.Millisecond)) {
		t.Errorf("a request heard of 10ms into a restart that ended at 100ms is not excused")
	}
	if fr.restartedSince(t0.Add(200 * time.Millisecond)) {
		t.Errorf("a request heard of after the restart ended is excused")
	}
	fr.down = append(fr.down, window{from: t0.Add(time.Second), restart: true}) // still down
	if !fr.restartedSince(t0.Add(500 * time.Millisecond)) {
		t.Errorf("a request heard of before a restart still under way is not excused")
	}
	stop := &fleetRun{down: []window{{from: t0, to: t0.Add(time.Second)}}} // a SIGSTOP, not a restart
	if stop.restartedSince(t0) {
		t.Errorf("a stop without a restart excuses DAEMON_STOPPING")
	}
}

// Of a worker's calls from the gateway, those it refused count; those
// it granted, whose requester went away, or that came from elsewhere do
// not.
func TestOnlyTheGatewaysCallsAWorkerRefusedCountAsRefused(t *testing.T) {
	ev := func(name, id, requester, code string) contract.Event {
		b, _ := json.Marshal(map[string]string{"requestId": id, "requester": requester, "code": code, "reason": "x"})
		return contract.Event{Event: name, Payload: b, Timestamp: 1}
	}
	evs := []contract.Event{
		ev(contract.EvLeaseRequested, "req_refused", "gw:ins_g:a", ""),
		ev(contract.EvLeaseRejected, "req_refused", "gw:ins_g:a", "NO_CAPACITY"),
		ev(contract.EvLeaseRequested, "req_gone", "gw:ins_g:b", ""),
		ev(contract.EvLeaseRejected, "req_gone", "gw:ins_g:b", "CANCELLED"),
		ev(contract.EvLeaseRequested, "req_granted", "gw:ins_g:c", ""),
		ev(contract.EvLeaseRequested, "req_local", "agent-d", ""),
		ev(contract.EvLeaseRejected, "req_local", "agent-d", "NO_CAPACITY"),
	}
	calls := gatewayCalls(evs, "gw:ins_g:")
	var ids, refused []string
	for _, c := range calls {
		ids = append(ids, c.id)
		if c.refused() {
			refused = append(refused, c.id)
		}
	}
	if strings.Join(ids, " ") != "req_refused req_gone req_granted" {
		t.Errorf("the gateway's calls are %v, want req_refused req_gone req_granted", ids)
	}
	if strings.Join(refused, " ") != "req_refused" {
		t.Errorf("the refused calls are %v, want req_refused only", refused)
	}
}

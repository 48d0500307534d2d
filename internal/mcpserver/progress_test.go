package mcpserver

import (
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

func status(state contract.RequestState, stage contract.Stage, pos int, eta int64, rev uint64) contract.LeaseRequestStatus {
	st := contract.LeaseRequestStatus{Rev: rev, Request: contract.LeaseRequestRecord{
		State: state, QueuePosition: pos, Spec: contract.RequestSpec{Platform: contract.PlatformIOS, Class: contract.ClassPhone},
	}}
	if stage != "" {
		st.Progress = &contract.LeaseProgress{Stage: stage, QueuePosition: pos, EtaMs: eta}
		st.Request.Stage = stage
	}
	if stage == contract.StageBooting || stage == contract.StageProvisioning {
		st.Target = &contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18.6"}
	}
	return st
}

func granted() contract.LeaseRequestStatus {
	st := status(contract.RequestGranted, "", 0, 0, 6)
	st.Request.Grant = &contract.LeaseGrant{Device: contract.GrantDevice{Spec: contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 16", OSVersion: "18.6"}}}
	return st
}

func TestProgressRisesThroughStagesWithPlainWords(t *testing.T) {
	t0 := time.Unix(1000, 0)
	steps := []struct {
		st   contract.LeaseRequestStatus
		at   time.Duration
		want string
	}{
		{status(contract.RequestQueued, contract.StageQueued, 3, 0, 1), 0, "Queued behind 2 other requests for an iOS phone"},
		{status(contract.RequestQueued, contract.StageQueued, 2, 0, 2), time.Second, "Queued behind 1 other request for an iOS phone"},
		{status(contract.RequestQueued, contract.StageQueued, 1, 0, 3), 2 * time.Second, "Next in queue for an iOS phone"},
		{status(contract.RequestStarting, contract.StageProvisioning, 0, 50_000, 4), 3 * time.Second, "Creating iPhone 16 (iOS 18.6) (~50 s left)"},
		// The ETA counts down between the daemon's updates.
		{status(contract.RequestStarting, contract.StageProvisioning, 0, 50_000, 4), 13 * time.Second, "Creating iPhone 16 (iOS 18.6) (~40 s left)"},
		{status(contract.RequestStarting, contract.StageBooting, 0, 40_000, 5), 20 * time.Second, "Booting iPhone 16 (iOS 18.6) (~40 s left)"},
		{granted(), 60 * time.Second, "Leased iPhone 16 (iOS 18.6)"},
	}
	var r reporter
	last := -1.0
	for i, s := range steps {
		p, msg, ok := r.step(s.st, t0.Add(s.at), time.Hour)
		if !ok {
			t.Fatalf("step %d not reported", i)
		}
		if msg != s.want {
			t.Errorf("step %d message = %q, want %q", i, msg, s.want)
		}
		if p <= last || p > progressTotal {
			t.Errorf("step %d progress = %v after %v (total %d): not rising within the total", i, p, last, progressTotal)
		}
		last = p
	}
	if last != progressTotal {
		t.Errorf("a grant reports %v, want the whole %d", last, progressTotal)
	}
	// Nothing new and no heartbeat due: nothing to send.
	if _, _, ok := r.step(steps[len(steps)-1].st, t0.Add(61*time.Second), time.Hour); ok {
		t.Error("an unchanged step was reported again before the heartbeat")
	}
}

func TestQueueBandLeavesRoomForDownloading(t *testing.T) {
	if !(stageBand["queued"] < stageBand["downloading"] && stageBand["downloading"] < stageBand["provisioning"] &&
		stageBand["provisioning"] < stageBand["booting"] && stageBand["booting"] < stageBand["granted"]) {
		t.Errorf("bands %v are not in the order a request moves", stageBand)
	}
	var r reporter
	p, _, _ := r.step(status(contract.RequestQueued, contract.StageQueued, 1, 0, 1), time.Unix(0, 0), time.Hour)
	if p >= stageBand["downloading"] || !strings.Contains(r.lastMsg, "Next") {
		t.Errorf("first in queue = %v %q, want below the downloading band", p, r.lastMsg)
	}
}

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
		{status(contract.RequestQueued, contract.StageQueued, 1, 0, 3), 2 * time.Second, "First in line for an iOS phone"},
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
	if p >= stageBand["downloading"] || !strings.Contains(r.lastMsg, "First in line") {
		t.Errorf("first in queue = %v %q, want below the downloading band", p, r.lastMsg)
	}
}

func downloading(waiting bool, percent *int, rev uint64) contract.LeaseRequestStatus {
	st := status(contract.RequestQueued, "", 0, 0, rev)
	st.Progress = &contract.LeaseProgress{Stage: contract.StageDownloading, Component: "26.4", Waiting: waiting, Percent: percent}
	st.Request.Stage = contract.StageDownloading
	return st
}

func TestDownloadingSitsBetweenQueuedAndProvisioningAndFollowsThePercent(t *testing.T) {
	n := func(v int) *int { return &v }
	seq := []contract.LeaseRequestStatus{
		status(contract.RequestQueued, contract.StageQueued, 1, 0, 1),
		downloading(true, nil, 2),
		downloading(false, nil, 3),
		downloading(false, n(10), 4),
		downloading(false, n(41), 5),
		downloading(false, n(100), 6),
		status(contract.RequestStarting, contract.StageProvisioning, 0, 50_000, 7),
		status(contract.RequestStarting, contract.StageBooting, 0, 40_000, 8),
	}
	var r reporter
	var got []float64
	var msgs []string
	for i, st := range seq {
		p, msg, ok := r.step(st, time.Unix(int64(i), 0), time.Hour)
		if !ok {
			t.Fatalf("step %d not reported", i)
		}
		got, msgs = append(got, p), append(msgs, msg)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Errorf("progress %v goes down or stays at step %d", got, i)
		}
	}
	for i := 1; i <= 5; i++ {
		if got[i] < stageBand["downloading"] || got[i] >= stageBand["provisioning"] {
			t.Errorf("downloading step %d = %v, outside its band [%v, %v)", i, got[i], stageBand["downloading"], stageBand["provisioning"])
		}
		if !strings.Contains(msgs[i], "26.4") {
			t.Errorf("message %q does not name the component", msgs[i])
		}
	}
	if got[1] != stageBand["downloading"] {
		t.Errorf("waiting behind another install = %v, want the band's base %v", got[1], stageBand["downloading"])
	}
	if got[4] < stageBand["downloading"]+400 || got[4] > stageBand["downloading"]+420 {
		t.Errorf("41%% = %v, want about 41%% into the band", got[4])
	}
	if !strings.Contains(msgs[4], "41%") || !strings.Contains(msgs[1], "Waiting") {
		t.Errorf("messages = %q", msgs)
	}
}

func TestWordsBeforeTheLineAndWhileAReleasedDeviceIsCleaned(t *testing.T) {
	var r reporter
	t0 := time.Unix(0, 0)
	// A request the daemon is still resolving (a download to start, say)
	// has no place in the line yet, and must not say it has one.
	if _, msg, _ := r.step(status(contract.RequestQueued, contract.StageQueued, 0, 0, 1), t0, time.Hour); msg != "Preparing the request for an iOS phone" {
		t.Errorf("before the line: %q", msg)
	}
	cleaning := status(contract.RequestQueued, contract.StageReclaiming, 1, 3000, 2)
	if _, msg, _ := r.step(cleaning, t0, time.Hour); msg != "Waiting for a released iOS device to be cleaned (~3 s left)" {
		t.Errorf("while a device is cleaned: %q", msg)
	}
	cleaning.Request.Spec.Model = "iPhone 17" // same revision: the ETA counts down from the first sight
	if _, msg, _ := r.step(cleaning, t0.Add(3*time.Second), time.Hour); msg != "Waiting for a released iPhone 17 to be cleaned (any moment now)" {
		t.Errorf("while an iPhone 17 is cleaned, at its ETA: %q", msg)
	}
}

// The first in line is told, in the progress message, what it waits for.
func TestFirstInLineSaysWhatItWaitsFor(t *testing.T) {
	now := time.Unix(1000, 0)
	st := status(contract.RequestQueued, contract.StageQueued, 1, 0, 1)
	st.Progress.Wait = &contract.QueueWait{Limit: contract.WaitPlatformRunning, InUse: 1, Max: 1,
		LeaseID: "lse_1", Holder: "holder2", EndsAt: now.Add(14 * time.Minute).UnixMilli()}
	var r reporter
	_, msg, ok := r.step(st, now, time.Hour)
	if want := "First in line for an iOS phone (1/1 running: lse_1 held by holder2, expires in 14m)"; !ok || msg != want {
		t.Errorf("message = %q, want %q", msg, want)
	}
}

// A download's message carries the sizes the installer printed.
func TestDownloadMessageNamesTheSizes(t *testing.T) {
	st := status(contract.RequestStarting, contract.StageDownloading, 0, 0, 1)
	pct := 41
	st.Progress.Component, st.Progress.Percent = "26.4", &pct
	st.Progress.BytesDone, st.Progress.BytesTotal = 3_600_000_000, 8_900_000_000
	var r reporter
	_, msg, ok := r.step(st, time.Unix(1000, 0), time.Hour)
	if want := "Downloading runtime 26.4 for an iOS phone (41%, 3.6 GB of 8.9 GB)"; !ok || msg != want {
		t.Errorf("message = %q, want %q", msg, want)
	}
}

package gateway

import (
	"bufio"
	"encoding/json"
	"net"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/jobs"
	"github.com/simlock/simlock/internal/store/memstore"
)

// silentInstaller is a worker that answers hello, then answers
// component.install with the pushes given, claiming another worker's id,
// and never with a result.
func silentInstaller(t *testing.T, conn net.Conn, pushes ...contract.JobEvent) {
	t.Helper()
	go func() {
		sc := bufio.NewScanner(conn)
		enc := json.NewEncoder(conn)
		for sc.Scan() {
			var req contract.Request
			if json.Unmarshal(sc.Bytes(), &req) != nil {
				return
			}
			switch req.Op {
			case contract.OpHello:
				res, _ := json.Marshal(contract.HelloResult{Protocol: 1, Daemon: contract.VersionRange{Min: 1, Max: 1}, Role: contract.RoleAdmin})
				_ = enc.Encode(contract.Response{ID: req.ID, Result: res})
			case contract.OpComponentInstall:
				for _, ev := range pushes {
					_ = enc.Encode(contract.Push{Push: contract.PushJob, ID: req.ID, Job: &ev})
				}
			}
		}
	}()
}

func TestAWorkerThatFallsSilentMidInstallEndsStaleAndUnknownAndItsBadClaimsAreDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _ := newFleet(t, newMemStore())
		gwEnd, workerEnd := net.Pipe()
		defer gwEnd.Close()
		defer workerEnd.Close()
		over := 150.0
		silentInstaller(t, workerEnd,
			contract.JobEvent{Phase: &contract.JobPhase{Phase: contract.PhaseDownload, Status: contract.PhaseStart, WorkerID: "someone-else"}},
			contract.JobEvent{Progress: &contract.JobProgress{WorkerID: "w1", Percent: &over}},
			contract.JobEvent{Phase: &contract.JobPhase{Phase: "teleport", Status: contract.PhaseStart, WorkerID: "w1"}},
		)
		c, err := client.New(t.Context(), gwEnd, contract.HelloInput{})
		if err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		f.workers["w1"] = &worker{view: contract.WorkerView{ID: "w1", Label: "one", Connection: contract.WorkerConnected}, client: c}
		f.mu.Unlock()
		tracker := jobs.New(jobs.Options{Store: memstore.New()})
		var got []contract.JobEvent
		var mu sync.Mutex
		start := time.Now()
		done, err := f.Install(t.Context(), tracker, InstallPolicy{Retries: 3, Silence: time.Minute},
			contract.ComponentInstallInput{Platform: contract.PlatformAndroid, Version: "37", Workers: &contract.WorkerChoice{All: true}},
			func(ev contract.JobEvent) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, ev)
			})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Minute {
			t.Errorf("the silent worker was given up after %v, want the silence bound, 1m0s", took)
		}
		if done.Result != contract.JobFailed || len(done.Workers) != 1 || done.Workers[0].Outcome != contract.OutcomeUnknown {
			t.Fatalf("done = %+v, want failed with the silent worker unknown", done)
		}
		var stale bool
		var phases []contract.JobPhase
		for _, ev := range got {
			switch {
			case ev.Worker != nil && ev.Worker.Status == contract.WorkerStale:
				stale = true
			case ev.Worker != nil && ev.Worker.Status == contract.WorkerRetrying:
				t.Errorf("a silent worker was retried: %+v", ev.Worker)
			case ev.Phase != nil:
				phases = append(phases, *ev.Phase)
			case ev.Progress != nil:
				t.Errorf("a percentage out of bounds was relayed: %v", *ev.Progress.Percent)
			}
		}
		if !stale {
			t.Error("the silent worker was never told stale")
		}
		if len(phases) != 1 || phases[0].WorkerID != "w1" || phases[0].Phase != contract.PhaseDownload {
			t.Errorf("relayed phases %+v, want the download alone, tagged w1 whatever the worker claimed", phases)
		}
		if !slices.ContainsFunc(got, func(ev contract.JobEvent) bool { return ev.Done != nil }) {
			t.Error("no done event ended the stream")
		}
	})
}

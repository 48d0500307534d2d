package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// A worker that went away is listed with why in words, "connection lost"
// when it was killed and "stopped" when it stopped, and the code behind it
// in JSON's reasonCode; the human list shows the words, never the code.
func TestAWorkerThatWentAwayIsListedWithWhyInWordsAndTheCodeInJSON(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a, b := f.worker("worker-a", 1), f.worker("worker-b", 1)
	idA, idB := instanceID(t, a), instanceID(t, b)
	f.await("both workers connected", 5*time.Second, connected(idA, idB))
	if err := syscall.Kill(lockPID(a.Dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r := b.run("daemon", "stop"); r.code != 0 {
		t.Fatalf("daemon stop on B\n%s", r)
	}
	ws := f.await("both workers disconnected", 5*time.Second, func(ws map[string]workerLine) bool {
		return ws[idA].Connection == "disconnected" && ws[idB].Connection == "disconnected"
	})
	if ws[idA].Reason != "connection lost" || ws[idA].ReasonCode != "DAEMON_CONNECTION_LOST" {
		t.Errorf("killed worker A: reason %q, code %q; want connection lost, DAEMON_CONNECTION_LOST", ws[idA].Reason, ws[idA].ReasonCode)
	}
	if ws[idB].Reason != "stopped" || ws[idB].ReasonCode != "DAEMON_STOPPING" {
		t.Errorf("stopped worker B: reason %q, code %q; want stopped, DAEMON_STOPPING", ws[idB].Reason, ws[idB].ReasonCode)
	}
	for _, args := range [][]string{{"worker", "list"}, {"status"}} {
		out := ptyRun(t, f.gw, args...)
		if strings.Contains(out, "DAEMON_") || !strings.Contains(out, "connection lost") || !strings.Contains(out, "stopped") {
			t.Errorf("simlock %s on a terminal shows a code, or not the words\n%s", strings.Join(args, " "), out)
		}
	}
}

package e2e

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// sleeper starts a process the test can end, standing for an agent's
// shell.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func TestADetachedLeaseBoundToAProcessEndsWhenItExits(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	shell := sleeper(t)
	f := h.follow()
	g := h.leaseDetached("bound-agent", "ios", "--bind-pid", strconv.Itoa(shell.Process.Pid))
	if g.Lease.BoundPID != shell.Process.Pid {
		t.Fatalf("grant's lease boundPid = %d, want %d", g.Lease.BoundPID, shell.Process.Pid)
	}
	f.find("lease.bound", isEvent("lease.bound", "leaseId", g.Lease.ID))
	if l, ok := h.leases()[g.Lease.ID]; !ok || l.BoundPID != shell.Process.Pid {
		t.Fatalf("list --leases: %+v, want the lease bound to %d", l, shell.Process.Pid)
	}
	_ = shell.Process.Kill()
	_ = shell.Wait()
	ev := f.next("the lease's end", isEvent("lease.released", "leaseId", g.Lease.ID))
	if r := ev.str("reason"); r != "bound-process-exited" {
		t.Errorf("lease.released reason = %q, want bound-process-exited", r)
	}
	if _, ok := h.leases()[g.Lease.ID]; ok {
		t.Errorf("the lease is still listed after its process exited")
	}
}

func TestAHeldLeaseBoundToAProcessIsReleasedWhenItExitsAndTheHolderExitsZero(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	shell := sleeper(t)
	p, g := h.hold("bound-holder", "ios", "--bind-pid", strconv.Itoa(shell.Process.Pid))
	if g.Lease.BoundPID != shell.Process.Pid {
		t.Fatalf("grant's lease boundPid = %d, want %d", g.Lease.BoundPID, shell.Process.Pid)
	}
	_ = shell.Process.Kill()
	_ = shell.Wait()
	p.waitLine(p.stderr, "the notice that the process exited", func(s string) bool {
		return strings.Contains(s, `"reason":"bound-process-exited"`)
	})
	if code := p.wait(); code != 0 {
		t.Errorf("holder exit code = %d, want 0\n%s", code, p.dump())
	}
	if _, ok := h.leases()[g.Lease.ID]; ok {
		t.Errorf("the lease is still listed after its process exited")
	}
}

func TestBindPidRefusesABadPidAndLeavesNoLease(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	expectFailure(t, h.run("lease", "--platform", "ios", "--detach", "--bind-pid", "1"), 2, "USAGE")
	// A pid no process has: refused by the daemon, and the lease just
	// granted goes back.
	gone := sleeper(t)
	pid := gone.Process.Pid
	_ = gone.Process.Kill()
	_ = gone.Wait()
	expectFailure(t, h.run("lease", "--platform", "ios", "--agent-id", "a", "--detach", "--bind-pid", strconv.Itoa(pid)), 2, "BAD_REQUEST")
	if ls := h.leases(); len(ls) != 0 {
		t.Errorf("leases after a refused bind = %+v, want none", ls)
	}
}

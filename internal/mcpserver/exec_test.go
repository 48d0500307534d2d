package mcpserver

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// scriptDriver is a demo driver whose simctl and adb are a shell script, so
// run_on_device has a real process to run.
type scriptDriver struct {
	*demo.Driver
	script string
}

// Passthrough pins the command to the target's device as the adb driver
// does (-s <serial> first) and tells the script whether the target is
// remote (SIMLOCK_TARGET_REMOTE).
func (d scriptDriver) Passthrough(t driver.Target, args []string) (driver.Command, error) {
	argv := []string{"-c", d.script, "sh"}
	if t.Device.Address != "" {
		argv = append(argv, "-s", t.Device.Address)
	}
	return driver.Command{Tool: "adb", Path: "/bin/sh", Args: append(argv, args...),
		Env: []string{"SIMLOCK_TARGET_REMOTE=" + strconv.FormatBool(t.Remote)}}, nil
}

func withScript(script string) func(*demo.Driver) driver.Driver {
	return func(d *demo.Driver) driver.Driver { return scriptDriver{Driver: d, script: script} }
}

// run_on_device runs the tool on the session's one lease and answers with
// the exit code and both streams.
func TestRunOnDeviceAnswersTheExitCodeAndOutput(t *testing.T) {
	r := newRigWith(t, withScript(`echo "args: $*"; read line; echo "stdin: $line"; echo oops >&2; exit 3`))
	ctx := context.Background()
	if res, _, err := r.call(ctx, "lease_simulator", map[string]any{"platform": "android"}); err != nil || res.IsError {
		t.Fatalf("lease: %v %v", err, res)
	}
	res, out, err := r.call(ctx, "run_on_device", map[string]any{"tool": "adb", "args": []string{"shell", "getprop"}, "stdin": "hello\n"})
	if err != nil || res.IsError {
		t.Fatalf("run_on_device: %v %+v", err, out)
	}
	// The daemon picks the leased emulator (-s <serial>) ahead of the args.
	stdout, _ := out["stdout"].(string)
	if out["exitCode"] != float64(3) || !strings.HasPrefix(stdout, "args: -s emulator-") || !strings.HasSuffix(stdout, " shell getprop\nstdin: hello\n") || out["stderr"] != "oops\n" {
		t.Errorf("run_on_device = %v, want exit 3, the args (after -s <serial>) and stdin echoed, oops on stderr", out)
	}
	if _, ok := out["truncated"]; ok {
		t.Errorf("a short output says truncated: %v", out)
	}
}

// The output kept is the last 64 KiB of a stream, marked truncated.
func TestRunOnDeviceKeepsTheTailOfALongOutput(t *testing.T) {
	r := newRigWith(t, withScript(`i=0; while [ $i -lt 3000 ]; do echo "line $i of a long output"; i=$((i+1)); done; echo last`))
	ctx := context.Background()
	if res, _, err := r.call(ctx, "lease_simulator", map[string]any{"platform": "android"}); err != nil || res.IsError {
		t.Fatalf("lease: %v %v", err, res)
	}
	_, out, err := r.call(ctx, "run_on_device", map[string]any{"tool": "adb", "args": []string{"logcat", "-d"}})
	if err != nil {
		t.Fatal(err)
	}
	stdout, _ := out["stdout"].(string)
	if out["truncated"] != true || len(stdout) > maxExecOutput || !strings.HasSuffix(stdout, "line 2999 of a long output\nlast\n") {
		t.Errorf("long output: truncated=%v, %d bytes kept (max %d), ends %q", out["truncated"], len(stdout), maxExecOutput, stdout[max(len(stdout)-40, 0):])
	}
}

// Bad input is refused before anything runs: no lease held, a timeout out
// of range, an unknown lease, the wrong tool for the lease's platform, an
// unknown tool.
func TestRunOnDeviceRefusesWhatCannotRun(t *testing.T) {
	r := newRigWith(t, withScript(`echo ran`))
	ctx := context.Background()
	for _, c := range []struct {
		args map[string]any
		code string
	}{
		{map[string]any{"tool": "adb", "args": []string{"devices"}}, "BAD_REQUEST"},                       // no lease yet
		{map[string]any{"tool": "adb", "args": []string{"devices"}, "timeoutSeconds": 56}, "BAD_REQUEST"}, // past 55
		{map[string]any{"tool": "adb", "args": []string{"devices"}, "leaseId": "lse_0000000000000000"}, "UNKNOWN_LEASE"},
	} {
		res, out, err := r.call(ctx, "run_on_device", c.args)
		if err != nil || !res.IsError || out["code"] != c.code {
			t.Errorf("run_on_device %v = %v %v, want %s", c.args, out, err, c.code)
		}
	}
	if res, _, err := r.call(ctx, "lease_simulator", map[string]any{"platform": "android"}); err != nil || res.IsError {
		t.Fatalf("lease: %v %v", err, res)
	}
	res, out, err := r.call(ctx, "run_on_device", map[string]any{"tool": "simctl", "args": []string{"list"}})
	if err != nil || !res.IsError || out["code"] != "PASSTHROUGH_REFUSED" {
		t.Errorf("simctl on an Android lease = %v %v, want PASSTHROUGH_REFUSED", out, err)
	}
	res, out, err = r.call(ctx, "run_on_device", map[string]any{"tool": "fastboot", "args": []string{}})
	if err != nil || !res.IsError || out["code"] != "UNKNOWN_PASSTHROUGH_TOOL" {
		t.Errorf("an unknown tool = %v %v, want UNKNOWN_PASSTHROUGH_TOOL", out, err)
	}
}

// A command still running after timeoutSeconds is stopped by the daemon,
// and the call answers EXEC_TIMEOUT rather than leaving it running.
func TestRunOnDeviceStopsACommandPastItsTimeout(t *testing.T) {
	r := newRigWith(t, withScript(`echo started; exec sleep 30`))
	ctx := context.Background()
	if res, _, err := r.call(ctx, "lease_simulator", map[string]any{"platform": "android"}); err != nil || res.IsError {
		t.Fatalf("lease: %v %v", err, res)
	}
	res, out, err := r.call(ctx, "run_on_device", map[string]any{"tool": "adb", "args": []string{"wait-for-device"}, "timeoutSeconds": 1})
	if err != nil || !res.IsError || out["code"] != "EXEC_TIMEOUT" {
		t.Errorf("a command past timeoutSeconds = %v %v, want EXEC_TIMEOUT", out, err)
	}
}

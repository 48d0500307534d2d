package android_test

import (
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/simlock/simlock/internal/driver"
)

// The command runs against simlock's server, pinned to the target's
// emulator by -s and by ANDROID_SERIAL, whatever the caller's environment
// says; a command that acts on no device is not pinned.
func TestPassthrough(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	port := strconv.Itoa(f.port)
	tgt := driver.Target{Device: driver.Device{ID: "simlock_pixel_1", Address: "emulator-5586"}}

	cmd, err := d.Passthrough(tgt, []string{"shell", "ls"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"-P", port, "-s", "emulator-5586", "shell", "ls"}; cmd.Tool != "adb" || cmd.Path != f.tool("adb") || !slices.Equal(cmd.Args, want) {
		t.Errorf("Passthrough = %+v; want adb %q", cmd, want)
	}
	if n := len(cmd.Env); n == 0 || cmd.Env[n-1] != "ANDROID_SERIAL=emulator-5586" {
		t.Errorf("env = %q, want ANDROID_SERIAL=emulator-5586 last", cmd.Env)
	}

	var refused *driver.PassthroughRefusedError
	if _, err := d.Passthrough(tgt, []string{"-s", "emulator-5588", "shell", "ls"}); !errors.As(err, &refused) {
		t.Errorf("-s another emulator: %v, want refused", err)
	}

	cmd, err = d.Passthrough(driver.Target{}, []string{"devices"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"-P", port, "devices"}; !slices.Equal(cmd.Args, want) || slices.ContainsFunc(cmd.Env, func(kv string) bool { return len(kv) > 15 && kv[:15] == "ANDROID_SERIAL=" }) {
		t.Errorf("devices without a lease = %+v; want adb %q with no serial", cmd, want)
	}
	if res := runCommand(t, cmd); res.ExitCode != 0 || string(res.Stdout) != "List of devices attached\n\n" {
		t.Errorf("adb devices through the passthrough: exit %d, %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

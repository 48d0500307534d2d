package android_test

import (
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/simlock/simlock/internal/driver"
)

func TestPassthrough(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f.opts)
	port := strconv.Itoa(f.port)
	for _, c := range []struct {
		name    string
		args    []string
		refused bool
	}{
		{"shell", []string{"-s", "emulator-5586", "shell", "ls"}, false},
		{"serial attached", []string{"-semulator-5586", "logcat", "-d"}, false},
		{"transport id", []string{"-t", "3", "shell", "id"}, false},
		{"emulator and usb flags", []string{"-e", "get-state"}, false},
		{"usb flag", []string{"-d", "devices"}, false},
		{"version", []string{"--version"}, false},
		{"help", []string{"--help"}, false},
		{"snapshot list", []string{"-s", "emulator-5586", "emu", "avd", "snapshot", "list"}, false},
		{"kill in a shell word", []string{"-s", "emulator-5586", "shell", "kill", "1234"}, false},

		{"empty", nil, true},
		{"options only", []string{"-s", "emulator-5586"}, true},
		{"serial without value", []string{"-s"}, true},
		{"kill-server", []string{"kill-server"}, true},
		{"kill-server after options", []string{"-s", "emulator-5586", "kill-server"}, true},
		{"emu kill", []string{"-s", "emulator-5586", "emu", "kill"}, true},
		{"emu kill in one word", []string{"-s", "emulator-5586", "emu", "kill now"}, true},
		{"emu kill upper case", []string{"EMU", "KILL"}, true},
		{"emu avd stop", []string{"emu", "avd", "stop"}, true},
		{"emu avd stop in one word", []string{"emu", "avd stop"}, true},
		{"emu avd snapshot delete", []string{"-s", "emulator-5586", "emu", "avd", "snapshot", "delete", "simlock_clean_baseline"}, true},
		{"server port", []string{"-P", "5037", "devices"}, true},
		{"server port attached", []string{"-P5037", "devices"}, true},
		{"server host", []string{"-H", "x", "devices"}, true},
		{"server socket", []string{"-L", "tcp:5037", "devices"}, true},
		{"long server port", []string{"--server-port", "5037", "devices"}, true},
		{"listen on all", []string{"-a", "devices"}, true},
		{"exit on write error", []string{"--exit-on-write-error", "devices"}, true},
		{"one device", []string{"--one-device", "emulator-5586", "devices"}, true},
		{"reply fd", []string{"--reply-fd", "3", "devices"}, true},
		{"unknown option", []string{"--frobnicate", "devices"}, true},
		{"option after serial", []string{"-s", "emulator-5586", "-H", "x", "shell"}, true},
	} {
		cmd, err := d.Passthrough(c.args)
		if c.refused {
			var refused *driver.PassthroughRefusedError
			if !errors.As(err, &refused) || refused.Tool != "adb" || refused.Message == "" {
				t.Errorf("%s: Passthrough(%q) = %+v, %v; want *driver.PassthroughRefusedError", c.name, c.args, cmd, err)
			}
			continue
		}
		want := append([]string{"-P", port}, c.args...)
		if err != nil || cmd.Tool != "adb" || cmd.Path != f.tool("adb") || !slices.Equal(cmd.Args, want) {
			t.Errorf("%s: Passthrough(%q) = %+v, %v; want adb %q", c.name, c.args, cmd, err, want)
		}
	}

	// The command runs against simlock's server.
	cmd, err := d.Passthrough([]string{"devices"})
	if err != nil {
		t.Fatal(err)
	}
	if res := runCommand(t, cmd); res.ExitCode != 0 || string(res.Stdout) != "List of devices attached\n\n" {
		t.Errorf("adb devices through the passthrough: exit %d, %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

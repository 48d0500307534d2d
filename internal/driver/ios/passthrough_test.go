package ios

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

func TestPassthrough(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		args []string
		// refused holds a word the refusal must give as its reason; ""
		// means the command passes.
		refused string
	}{
		{[]string{"list", "devices"}, ""},
		{[]string{"boot", "6F1C3E0A-9B7D-4C2E-8A51-2D4F9E0B7C11"}, ""},
		{[]string{"shutdown", "6F1C3E0A-9B7D-4C2E-8A51-2D4F9E0B7C11"}, ""},
		{[]string{"io", "booted", "screenshot", "/tmp/s.png"}, ""},
		{[]string{"runtime", "list"}, ""},
		{[]string{"list", "--set", "x"}, ""}, // after the subcommand it is list's argument
		{[]string{"help", "create"}, ""},
		{nil, "no subcommand"},
		{[]string{}, "no subcommand"},
		{[]string{"create", "x", "iPhone 16"}, "create"},
		{[]string{"erase", "6F1C3E0A-9B7D-4C2E-8A51-2D4F9E0B7C11"}, "erase"},
		{[]string{"erase", "all"}, "erase"},
		{[]string{"delete", "6F1C3E0A-9B7D-4C2E-8A51-2D4F9E0B7C11"}, "delete"},
		{[]string{"delete", "unavailable"}, "delete"},
		{[]string{"shutdown", "all"}, "shutdown all"},
		{[]string{"Shutdown", "ALL"}, "shutdown all"},
		{[]string{"runtime", "delete", "5A8D2AC8-603C-4B91-B39C-8C6B72F48495"}, "runtime delete"},
		{[]string{"runtime", "-v", "delete", "X"}, "runtime delete"},
		{[]string{"--set", "x", "list"}, "device set"},
		{[]string{"--set=x", "list"}, "device set"},
		{[]string{"-set", "x", "list"}, "device set"},
		{[]string{"--profiles", "x", "list"}, "device set"},
		{[]string{"--profiles=x", "list"}, "device set"},
		{[]string{"--noxpc", "list"}, "before the subcommand"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd, err := h.d.Passthrough(tc.args)
			if tc.refused != "" {
				var refused *driver.PassthroughRefusedError
				if !errors.As(err, &refused) || refused.Tool != "simctl" {
					t.Fatalf("Passthrough = %+v, %v; want refused", cmd, err)
				}
				if !strings.Contains(refused.Message, tc.refused) {
					t.Errorf("message %q does not say %q", refused.Message, tc.refused)
				}
				if code := driver.ContractError(err).Code; code != contract.CodePassthroughRefused {
					t.Errorf("contract code = %s, want PASSTHROUGH_REFUSED", code)
				}
				return
			}
			if err != nil {
				t.Fatalf("Passthrough: %v", err)
			}
			want := driver.Command{
				Tool: "simctl",
				Path: filepath.Join(h.env.Bin, "xcrun"),
				Args: append([]string{"simctl", "--set", h.root}, tc.args...),
				Env:  h.opts.Env,
			}
			if cmd.Tool != want.Tool || cmd.Path != want.Path || !slices.Equal(cmd.Args, want.Args) || !slices.Equal(cmd.Env, want.Env) {
				t.Errorf("Passthrough = %+v\nwant          %+v", cmd, want)
			}
		})
	}
}

// The command Passthrough gives runs, and reaches the root's devices.
func TestPassthroughRuns(t *testing.T) {
	h := newHarness(t)
	dev := h.provision(t, "iPhone 16", "18.6")
	cmd, err := h.d.Passthrough([]string{"list", "devices"})
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(cmd.Path, cmd.Args...)
	c.Env = append(h.env.Environ(nil), cmd.Env...)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	if !strings.Contains(string(out), dev.ID) {
		t.Errorf("output %q does not list %s", out, dev.ID)
	}
}

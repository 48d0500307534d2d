package ios

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// commandLineToolsOnly is what xcodebuild says when xcode-select points at
// the command line tools.
const commandLineToolsOnly = "xcode-select: error: tool 'xcodebuild' requires Xcode, but active developer directory '/Library/Developer/CommandLineTools' is a command line tools instance\n"

func TestToolVersions(t *testing.T) {
	h := newHarness(t)
	got, err := h.d.ToolVersions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := []driver.ToolVersion{{Name: "xcode", Version: "26.1", Build: "17B55"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("ToolVersions = %+v, want %+v", got, want)
	}
	cmds := h.rec.commands()
	if len(cmds) != 1 || !slices.Equal(cmds[0].Args, []string{"-version"}) || cmds[0].Timeout != xcodebuildTimeout ||
		!strings.HasSuffix(cmds[0].Path, "xcodebuild") {
		t.Errorf("commands = %+v, want one xcodebuild -version with a 15 s timeout", cmds)
	}

	h.env.FailNext(t, "xcodebuild", "version", 1, commandLineToolsOnly)
	if got, err := h.d.ToolVersions(t.Context()); err != nil || len(got) != 0 {
		t.Errorf("with the command line tools only: %+v, %v; want none", got, err)
	}

	h.env.FailNext(t, "xcodebuild", "version", 70, "xcodebuild: error: something broke")
	_, err = h.d.ToolVersions(t.Context())
	crashOf(t, err, "tool-versions")
}

func prerequisites(missing []driver.Missing) []string {
	var out []string
	for _, m := range missing {
		out = append(out, m.Prerequisite)
	}
	return out
}

func TestPrerequisitesWithoutXcode(t *testing.T) {
	opts, e, _ := newOptions(t)
	opts.LookPath = noTools
	opts.Root = "relative/root" // New would refuse this too; Prerequisites must not care
	missing := Prerequisites(t.Context(), opts)
	if got := prerequisites(missing); !slices.Equal(got, []string{"xcrun", "xcode"}) {
		t.Fatalf("Prerequisites = %+v, want xcrun and xcode", missing)
	}
	for _, m := range missing {
		if m.Platform != contract.PlatformIOS || m.Message == "" || m.Remedy == "" {
			t.Errorf("incomplete: %+v", m)
		}
	}
	if calls := e.Calls(t); len(calls) != 0 {
		t.Errorf("tools ran: %v", calls)
	}
}

func TestPrerequisitesOffMacOSSayWhatThePlatformNeeds(t *testing.T) {
	opts, _, _ := newOptions(t)
	opts.LookPath, opts.GOOS = noTools, "linux"
	missing := Prerequisites(t.Context(), opts)
	if got := prerequisites(missing); !slices.Equal(got, []string{"macos"}) {
		t.Fatalf("Prerequisites on linux = %+v, want the one macos finding (nothing to install with xcode-select)", missing)
	}
	if !strings.Contains(missing[0].Message, "macOS with Xcode") || strings.Contains(missing[0].Remedy, "xcode-select") {
		t.Errorf("finding %+v, want it to say iOS needs macOS with Xcode", missing[0])
	}
}

func TestPrerequisites(t *testing.T) {
	cases := []struct {
		name string
		// fail is the xcodebuild option to fail, with its stderr.
		fail, stderr string
		want         []string
		remedy       string
		// ran is the xcodebuild options the check runs.
		ran []string
	}{
		{name: "ready", ran: []string{"-version", "-license", "-checkFirstLaunchStatus"}},
		{name: "license not accepted", fail: "license", stderr: "You have not agreed to the Xcode license agreements.",
			want: []string{"xcode-license"}, remedy: "sudo xcodebuild -license accept",
			ran: []string{"-version", "-license", "-checkFirstLaunchStatus"}},
		{name: "first launch pending", fail: "checkFirstLaunchStatus",
			want: []string{"xcode-first-launch"}, remedy: "sudo xcodebuild -runFirstLaunch",
			ran: []string{"-version", "-license", "-checkFirstLaunchStatus"}},
		{name: "command line tools only", fail: "version", stderr: commandLineToolsOnly,
			want: []string{"xcode"}, remedy: selectXcode, ran: []string{"-version"}},
		{name: "xcodebuild broken", fail: "version", stderr: "dyld: Library not loaded",
			want: []string{"xcode"}, remedy: selectXcode, ran: []string{"-version"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts, e, _ := newOptions(t)
			if tc.fail != "" {
				e.FailNext(t, "xcodebuild", tc.fail, 69, tc.stderr)
			}
			missing := Prerequisites(t.Context(), opts)
			if got := prerequisites(missing); !slices.Equal(got, tc.want) {
				t.Fatalf("Prerequisites = %+v, want %q", missing, tc.want)
			}
			if len(missing) > 0 && missing[0].Remedy != tc.remedy {
				t.Errorf("remedy = %q, want %q", missing[0].Remedy, tc.remedy)
			}
			var ran []string
			for _, c := range e.Calls(t) {
				if c.Tool != "xcodebuild" {
					t.Errorf("ran %s %q", c.Tool, c.Args)
					continue
				}
				ran = append(ran, c.Args[0])
			}
			if !slices.Equal(ran, tc.ran) {
				t.Errorf("ran xcodebuild %q, want %q", ran, tc.ran)
			}
		})
	}
}

func TestCallErrorMessages(t *testing.T) {
	exit := &CallError{Tool: "simctl", Args: []string{"--set", "/r", "boot", "U"}, ExitCode: 149, Stderr: "Unable to boot"}
	if got, want := exit.Error(), "simctl --set /r boot U exited with code 149: Unable to boot"; got != want {
		t.Errorf("exit: %q, want %q", got, want)
	}
	cause := errors.New("exec: no such file")
	failed := &CallError{Tool: "xcodebuild", Args: []string{"-version"}, Err: cause}
	if !errors.Is(failed, cause) || failed.TimedOut() {
		t.Errorf("start failure: %v", failed)
	}
}

// With only the command line tools selected, New refuses with the remedy:
// the platform is off and says why, rather than on and failing every lease.
func TestNewRefusesTheCommandLineToolsAlone(t *testing.T) {
	opts, e, _ := newOptions(t)
	e.FailNext(t, "xcodebuild", "version", 1, commandLineToolsOnly)
	d, err := New(t.Context(), opts)
	var clt *XcodeNotSelectedError
	if !errors.As(err, &clt) || d != nil {
		t.Fatalf("New with the command line tools only = %v, %v; want an *XcodeNotSelectedError", d, err)
	}
	if !strings.Contains(err.Error(), selectXcode) {
		t.Errorf("the refusal %q does not give the remedy %q", err, selectXcode)
	}
	// With Xcode selected, New goes on.
	if _, err := New(t.Context(), opts); err != nil {
		t.Fatalf("New with Xcode: %v", err)
	}
}

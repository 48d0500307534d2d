package ios

import (
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

const (
	leaseUDID = "6F1C3E0A-9B7D-4C2E-8A51-2D4F9E0B7C11"
	otherUDID = "5A8D2AC8-603C-4B91-B39C-8C6B72F48495"
)

var (
	leased = driver.Target{Device: driver.Device{ID: leaseUDID, Address: leaseUDID}}
	remote = driver.Target{Device: leased.Device, Remote: true}
	none   = driver.Target{}
)

// Every command simctlArgs lets through: device operands pinned to the
// lease's UDID, booted rewritten to it.
func TestSimctlArgsPinsTheLeasesSimulator(t *testing.T) {
	for _, c := range []struct {
		t    driver.Target
		args []string
		want []string
	}{
		{none, []string{"list", "devices"}, nil},
		{none, []string{"list", "-j", "devices"}, nil},
		{leased, []string{"list", "--set", "x"}, nil}, // after the subcommand it is list's argument
		{none, []string{"help", "create"}, nil},
		{leased, []string{"boot", leaseUDID}, nil},
		{leased, []string{"boot", strings.ToLower(leaseUDID)}, []string{"boot", leaseUDID}},
		{leased, []string{"bootstatus", leaseUDID, "-b"}, nil},
		{leased, []string{"shutdown", leaseUDID}, nil},
		{leased, []string{"io", "booted", "screenshot", "/tmp/s.png"}, []string{"io", leaseUDID, "screenshot", "/tmp/s.png"}},
		{leased, []string{"io", "BOOTED", "enumerate"}, []string{"io", leaseUDID, "enumerate"}},
		{remote, []string{"io", "booted", "screenshot", "--type=png", "-"}, []string{"io", leaseUDID, "screenshot", "--type=png", "-"}},
		{remote, []string{"io", leaseUDID, "recordVideo", "--codec=hevc", "--force", "-"}, nil},
		{remote, []string{"openurl", leaseUDID, "myapp://deep/link"}, nil},
		{leased, []string{"openurl", leaseUDID, "/tmp/page.html"}, nil},
		{remote, []string{"openurl", "booted", "https://example.com/a"}, []string{"openurl", leaseUDID, "https://example.com/a"}},
		{leased, []string{"install", leaseUDID, "/tmp/My.app"}, nil},
		{leased, []string{"addmedia", "booted", "/tmp/a.jpg"}, []string{"addmedia", leaseUDID, "/tmp/a.jpg"}},
		{remote, []string{"uninstall", leaseUDID, "com.example.app"}, nil},
		{remote, []string{"launch", leaseUDID, "com.example.app", "--flag", "booted"}, nil},
		{remote, []string{"launch", "--terminate-running-process", "-w", "booted", "com.example.app"}, []string{"launch", "--terminate-running-process", "-w", leaseUDID, "com.example.app"}},
		{leased, []string{"launch", "--stdout=/tmp/out.txt", leaseUDID, "com.example.app"}, nil},
		{remote, []string{"terminate", leaseUDID, "com.example.app"}, nil},
		{remote, []string{"privacy", leaseUDID, "grant", "photos", "com.example.app"}, nil},
		{remote, []string{"keychain", leaseUDID, "reset"}, nil},
		{leased, []string{"keychain", leaseUDID, "add-root-cert", "/tmp/ca.pem"}, nil},
		{remote, []string{"push", leaseUDID, "com.example.app", "-"}, nil},
		{leased, []string{"push", leaseUDID, "com.example.app", "/tmp/p.json"}, nil},
		{remote, []string{"status_bar", leaseUDID, "override", "--time", "9:41"}, nil},
		{remote, []string{"ui", leaseUDID, "appearance", "dark"}, nil},
		{remote, []string{"location", leaseUDID, "set", "37.33,-122.03"}, nil},
		{remote, []string{"get_app_container", leaseUDID, "com.example.app", "data"}, nil},
		{remote, []string{"pbpaste", leaseUDID}, nil},
		{remote, []string{"listapps", leaseUDID}, nil},
	} {
		want := c.want
		if want == nil {
			want = c.args
		}
		got, err := simctlArgs(c.t, c.args)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("simctlArgs(%q) = %q, %v; want %q", c.args, got, err, want)
		}
	}
}

// Every refusal, with a word its message must give as the reason.
func TestSimctlArgsRefuses(t *testing.T) {
	for _, c := range []struct {
		t    driver.Target
		args []string
		why  string
	}{
		{leased, nil, "no subcommand"},
		{leased, []string{}, "no subcommand"},
		// Another simulator, however it is named.
		{leased, []string{"io", otherUDID, "enumerate"}, "must be this lease's simulator"},
		{leased, []string{"boot", otherUDID}, "must be this lease's simulator"},
		{leased, []string{"install", "iPhone 16", "/tmp/My.app"}, "must be this lease's simulator"},
		{leased, []string{"shutdown", "all"}, "shutdown all"},
		{leased, []string{"Shutdown", "ALL"}, "not a simctl subcommand"},
		{leased, []string{"openurl"}, "needs a device"},
		{none, []string{"io", "booted", "enumerate"}, "no lease names one"},
		{leased, []string{"uninstall", "-x", leaseUDID, "com.example.app"}, "takes no option before its device"},
		// Subcommands that act on the host, on every simulator, or on
		// simlock's own.
		{leased, []string{"create", "x", "iPhone 16"}, "create"},
		{leased, []string{"clone", leaseUDID, "copy"}, "clone"},
		{leased, []string{"erase", leaseUDID}, "erase"},
		{leased, []string{"erase", "all"}, "erase"},
		{leased, []string{"delete", leaseUDID}, "delete"},
		{leased, []string{"delete", "unavailable"}, "delete"},
		{leased, []string{"rename", leaseUDID, "mine"}, "rename"},
		{leased, []string{"upgrade", leaseUDID, "com.apple.CoreSimulator.SimRuntime.iOS-26-1"}, "upgrade"},
		{leased, []string{"runtime", "delete", "X"}, "runtime"},
		{none, []string{"runtime", "list"}, "runtime"},
		{leased, []string{"spawn", leaseUDID, "/bin/sh", "-c", "id"}, "spawn"},
		{leased, []string{"pair", leaseUDID, otherUDID}, "pair"},
		{leased, []string{"unpair", "X"}, "unpair"},
		{leased, []string{"pair_activate", "X"}, "pair_activate"},
		{leased, []string{"pbsync", leaseUDID, otherUDID}, "pbsync"},
		{leased, []string{"diagnose"}, "diagnose"},
		{leased, []string{"launch", "--console", leaseUDID, "com.example.app"}, "--console"},
		{leased, []string{"launch", "--console-pty", leaseUDID, "com.example.app"}, "--console-pty"},
		{leased, []string{"launch", "--stdout", leaseUDID, "com.example.app"}, "--stdout=<path>"},
		{leased, []string{"launch", "--frobnicate", leaseUDID, "com.example.app"}, "not one simlock passes"},
		{leased, []string{"io", leaseUDID, "frobnicate"}, "not an operation"},
		{leased, []string{"keychain", leaseUDID, "frobnicate"}, "not an action"},
		{remote, []string{"io", leaseUDID, "screenshot", "-/tmp/s.png"}, "not one simlock passes to a remote caller"},
		{remote, []string{"io", leaseUDID, "screenshot", "--file=/tmp/s.png"}, "not one simlock passes to a remote caller"},
		{remote, []string{"io", leaseUDID, "screenshot", "--type"}, "not one simlock passes to a remote caller"},
		{remote, []string{"openurl", leaseUDID, "/etc/passwd"}, "has no scheme"},
		{remote, []string{"openurl", leaseUDID, "etc/passwd"}, "has no scheme"},
		{leased, []string{"frobnicate", leaseUDID}, "not a simctl subcommand"},
		// Options before the subcommand.
		{leased, []string{"--set", "x", "list"}, "device set"},
		{leased, []string{"--set=x", "list"}, "device set"},
		{leased, []string{"-set", "x", "list"}, "device set"},
		{leased, []string{"--profiles", "x", "list"}, "device set"},
		{leased, []string{"--profiles=x", "list"}, "device set"},
		{leased, []string{"--noxpc", "list"}, "before the subcommand"},
	} {
		assertRefused(t, c.t, c.args, c.why)
	}
}

// From a remote surface, every operand that names a file of this machine
// is refused, and the refusal names the routes that move files instead.
func TestSimctlArgsRefusesHostFilesToARemoteCaller(t *testing.T) {
	for _, args := range [][]string{
		{"install", leaseUDID, "/Users/u/Build/My.app"},
		{"install_app_data", leaseUDID, "/tmp/data.xcappdata"},
		{"addmedia", "booted", "/tmp/a.jpg"},
		{"io", "booted", "screenshot", "/any/host/path.png"},
		{"io", leaseUDID, "screenshot", "--type", "png", "-"}, // png is read as the file
		{"io", leaseUDID, "recordVideo", "--codec=h264", "/tmp/v.mov"},
		{"keychain", leaseUDID, "add-root-cert", "/tmp/ca.pem"},
		{"keychain", leaseUDID, "add-cert", "/tmp/c.pem"},
		{"push", leaseUDID, "com.example.app", "/tmp/p.json"},
		{"push", leaseUDID, "/tmp/p.json"},
		{"launch", "--stdout=/tmp/out", leaseUDID, "com.example.app"},
		{"launch", "--stderr=/tmp/err", leaseUDID, "com.example.app"},
		{"openurl", leaseUDID, "file:///etc/passwd"},
		{"openurl", leaseUDID, " FILE:/etc/passwd"},
		{"io", leaseUDID, "recordVideo", "-o", "/tmp/v.mov"},
		{"ui", leaseUDID, "appearance", "--output=/tmp/x"},
	} {
		assertRefused(t, remote, args, "/v1/leases/{id}/files")
	}
}

func assertRefused(t *testing.T, tgt driver.Target, args []string, why string) {
	t.Helper()
	got, err := simctlArgs(tgt, args)
	var refused *driver.PassthroughRefusedError
	if !errors.As(err, &refused) || refused.Tool != "simctl" {
		t.Errorf("simctlArgs(%q) = %q, %v; want refused", args, got, err)
		return
	}
	if !strings.Contains(refused.Message, why) {
		t.Errorf("simctlArgs(%q): refusal %q does not say %q", args, refused.Message, why)
	}
	if code := driver.ContractError(err).Code; code != contract.CodePassthroughRefused {
		t.Errorf("simctlArgs(%q): code %s, want PASSTHROUGH_REFUSED", args, code)
	}
}

// The driver's command is xcrun simctl --set <root> and the pinned
// arguments, with the driver's environment.
func TestPassthrough(t *testing.T) {
	h := newHarness(t)
	cmd, err := h.d.Passthrough(leased, []string{"io", "booted", "screenshot", "/tmp/s.png"})
	if err != nil {
		t.Fatal(err)
	}
	want := driver.Command{
		Tool: "simctl",
		Path: filepath.Join(h.env.Bin, "xcrun"),
		Args: []string{"simctl", "--set", h.root, "io", leaseUDID, "screenshot", "/tmp/s.png"},
		Env:  h.opts.Env,
	}
	if cmd.Tool != want.Tool || cmd.Path != want.Path || !slices.Equal(cmd.Args, want.Args) || !slices.Equal(cmd.Env, want.Env) {
		t.Errorf("Passthrough = %+v\nwant          %+v", cmd, want)
	}
	if _, err := h.d.Passthrough(leased, []string{"erase", "all"}); driver.ContractError(err).Code != contract.CodePassthroughRefused {
		t.Errorf("erase all: %v, want PASSTHROUGH_REFUSED", err)
	}
}

// The command Passthrough gives runs, and reaches the root's devices.
func TestPassthroughRuns(t *testing.T) {
	h := newHarness(t)
	dev := h.provision(t, "iPhone 16", "18.6")
	cmd, err := h.d.Passthrough(driver.Target{}, []string{"list", "devices"})
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

// FuzzSimctlArgs: whatever the arguments, a command simctlArgs lets
// through runs in simlock's set, its device operand (the first operand
// after the subcommand and its options) is the target's UDID, and, for a
// remote target, it names no file of the host.
func FuzzSimctlArgs(f *testing.F) {
	for _, seed := range []string{
		"list\x00devices",
		"io\x00booted\x00screenshot\x00/any/host/path",
		"io\x00" + otherUDID + "\x00enumerate",
		"install\x00booted\x00/tmp/My.app",
		"launch\x00--console\x00booted\x00com.x",
		"launch\x00--stdout=/tmp/o\x00booted\x00com.x",
		"launch\x00-w\x00" + leaseUDID + "\x00com.x\x00booted",
		"shutdown\x00all",
		"spawn\x00booted\x00/bin/sh",
		"push\x00booted\x00com.x\x00-",
		"keychain\x00booted\x00add-root-cert\x00/tmp/ca.pem",
		"--set\x00/tmp\x00list",
		"pbsync\x00booted\x00" + otherUDID,
		"openurl\x00booted\x00file:///etc/passwd",
		"openurl\x00booted\x00/etc/passwd",
		"io\x00booted\x00screenshot\x00-/tmp/s.png",
	} {
		f.Add(seed, false, true)
		f.Add(seed, true, true)
		f.Add(seed, true, false)
	}
	f.Fuzz(func(t *testing.T, joined string, isRemote, hasDevice bool) {
		args := strings.Split(joined, "\x00")
		tgt := driver.Target{Remote: isRemote}
		if hasDevice {
			tgt.Device = leased.Device
		}
		out, err := simctlArgs(tgt, args)
		if err != nil {
			var refused *driver.PassthroughRefusedError
			if !errors.As(err, &refused) {
				t.Fatalf("simctlArgs(%q) failed with %T %v, not a refusal", args, err, err)
			}
			return
		}
		if len(out) == 0 || strings.HasPrefix(out[0], "-") {
			t.Fatalf("simctlArgs(%q) = %q: no subcommand first", args, out)
		}
		sub, rest := out[0], out[1:]
		if sub == "list" || sub == "help" {
			return
		}
		i := slices.IndexFunc(rest, func(a string) bool { return !strings.HasPrefix(a, "-") || a == "-" })
		if !hasDevice || i < 0 || rest[i] != leaseUDID {
			t.Fatalf("simctlArgs(%q) = %q: the device operand is not the target's %s", args, out, leaseUDID)
		}
		if slices.Contains([]string{"spawn", "create", "clone", "delete", "erase", "runtime", "pbsync", "pair", "rename", "upgrade", "diagnose"}, sub) {
			t.Fatalf("simctlArgs(%q) = %q: %s reaches beyond the simulator", args, out, sub)
		}
		for _, o := range rest[:i] {
			if strings.HasPrefix(o, "--console") {
				t.Fatalf("simctl launch %q ties the app to a terminal of the host", o)
			}
			if isRemote && (strings.HasPrefix(o, "--stdout") || strings.HasPrefix(o, "--stderr")) {
				t.Fatalf("simctlArgs(%q) = %q: %s names a host file for a remote caller", args, out, o)
			}
		}
		if !isRemote {
			return
		}
		operands := rest[i+1:]
		switch sub {
		case "install", "install_app_data", "addmedia":
			t.Fatalf("simctlArgs(%q) = %q: %s reads host files for a remote caller", args, out, sub)
		case "io":
			if len(operands) > 0 && (operands[0] == "screenshot" || operands[0] == "recordVideo") {
				for _, a := range operands[1:] {
					if a != "-" && a != "--force" && !regexp.MustCompile(`^--(type|display|mask|codec)=`).MatchString(a) {
						t.Fatalf("simctlArgs(%q) = %q: %q may be a host file for a remote caller", args, out, a)
					}
				}
			}
		case "keychain":
			if len(operands) > 0 && operands[0] != "reset" {
				t.Fatalf("simctlArgs(%q) = %q: a certificate file of the host for a remote caller", args, out)
			}
		case "openurl":
			if len(operands) == 0 {
				break
			}
			if u := strings.ToLower(strings.TrimSpace(operands[0])); strings.HasPrefix(u, "file:") || !regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(u) {
				t.Fatalf("simctlArgs(%q) = %q: %q may name a host file for a remote caller", args, out, operands[0])
			}
		case "push":
			if operands[len(operands)-1] != "-" {
				t.Fatalf("simctlArgs(%q) = %q: a payload file of the host for a remote caller", args, out)
			}
		}
	})
}

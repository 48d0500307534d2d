package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/runner"
)

// fakeManager stands for launchctl and systemctl: it records each call and
// answers from answer (nil: exit 0, no output).
type fakeManager struct {
	calls  []string
	answer func(args []string) (runner.Result, error)
}

func (f *fakeManager) Run(_ context.Context, c runner.Cmd) (runner.Result, error) {
	args := append([]string{c.Path}, c.Args...)
	f.calls = append(f.calls, strings.Join(args, " "))
	if f.answer != nil {
		return f.answer(args)
	}
	return runner.Result{}, nil
}

func installer(t *testing.T, f *fakeManager) Installer {
	return Installer{Runner: f, Root: t.TempDir()}
}

func wantCalls(t *testing.T, what string, f *fakeManager, want ...string) {
	t.Helper()
	if !slices.Equal(f.calls, want) {
		t.Errorf("%s ran:\n  %s\nwant:\n  %s", what, strings.Join(f.calls, "\n  "), strings.Join(want, "\n  "))
	}
	f.calls = nil
}

func wantFile(t *testing.T, in Installer, p Plan, present bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(in.Root, p.Path))
	switch {
	case present && err != nil:
		t.Errorf("the service file %s: %v", p.Path, err)
	case present && string(b) != string(p.File):
		t.Errorf("the service file %s holds:\n%s\nwant:\n%s", p.Path, b, p.File)
	case !present && !errors.Is(err, os.ErrNotExist):
		t.Errorf("the service file %s is still there (err %v)", p.Path, err)
	}
}

// Install writes the plist where launchd reads LaunchAgents and
// bootstraps it into the user's GUI domain; installing again unloads the
// old one first; uninstall boots it out and removes the file; a second
// uninstall has nothing to do.
func TestLaunchdInstallAndUninstallRunTheseCommands(t *testing.T) {
	f := &fakeManager{}
	in := installer(t, f)
	p := plan(t, "darwin", spec("/Users/me/.simlock", contract.ModeWorker, false))
	ctx := context.Background()

	if _, err := in.Install(ctx, p); err != nil {
		t.Fatal(err)
	}
	wantFile(t, in, p, true)
	wantCalls(t, "install", f, "launchctl bootstrap gui/501 /Users/me/Library/LaunchAgents/dev.simlock.daemon.plist")

	if _, err := in.Install(ctx, p); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, "a second install", f,
		"launchctl bootout gui/501/dev.simlock.daemon",
		"launchctl bootstrap gui/501 /Users/me/Library/LaunchAgents/dev.simlock.daemon.plist")

	if err := in.Start(ctx, p); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, "start", f, "launchctl kickstart gui/501/dev.simlock.daemon")

	// bootout of a service launchd no longer knows fails; uninstall goes on.
	f.answer = func(args []string) (runner.Result, error) {
		return runner.Result{ExitCode: 3, Stderr: []byte("Boot-out failed: 3: No such process")}, nil
	}
	if _, err := in.Uninstall(ctx, p); err != nil {
		t.Fatal(err)
	}
	wantFile(t, in, p, false)
	wantCalls(t, "uninstall", f, "launchctl bootout gui/501/dev.simlock.daemon")

	if cmds, err := in.Uninstall(ctx, p); err != nil || len(cmds) != 0 {
		t.Errorf("uninstall of nothing: %v, %v; want no commands", cmds, err)
	}
	wantCalls(t, "uninstall of nothing", f)
}

// A user unit goes to ~/.config/systemd/user and is enabled and started
// with systemctl --user; a system unit to /etc/systemd/system with plain
// systemctl; installing again restarts it; uninstall disables, stops and
// removes it and reloads the manager.
func TestSystemdInstallAndUninstallRunTheseCommands(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		system    bool
		systemctl string
		dir       string
	}{
		{false, "systemctl --user", "/Users/me/.config/systemd/user/"},
		{true, "systemctl", "/etc/systemd/system/"},
	} {
		f := &fakeManager{}
		in := installer(t, f)
		p := plan(t, "linux", spec("/Users/me/.simlock", contract.ModeWorker, c.system))
		if !strings.HasPrefix(p.Path, c.dir) {
			t.Errorf("system=%v: unit path %s, want under %s", c.system, p.Path, c.dir)
		}
		if _, err := in.Install(ctx, p); err != nil {
			t.Fatal(err)
		}
		wantFile(t, in, p, true)
		wantCalls(t, "install", f, c.systemctl+" daemon-reload", c.systemctl+" enable --now "+p.Name)

		if _, err := in.Install(ctx, p); err != nil {
			t.Fatal(err)
		}
		wantCalls(t, "a second install", f, c.systemctl+" daemon-reload", c.systemctl+" enable --now "+p.Name, c.systemctl+" restart "+p.Name)

		if _, err := in.Uninstall(ctx, p); err != nil {
			t.Fatal(err)
		}
		wantFile(t, in, p, false)
		wantCalls(t, "uninstall", f, c.systemctl+" disable --now "+p.Name, c.systemctl+" daemon-reload")
	}
}

// Without a user systemd instance (no login session, no lingering),
// install fails with SERVICE_MANAGER_FAILED naming both fixes; without
// systemctl at all, SERVICE_UNSUPPORTED.
func TestAManagerThatCannotBeReachedSaysHowToFixIt(t *testing.T) {
	ctx := context.Background()
	p := plan(t, "linux", spec("/Users/me/.simlock", contract.ModeWorker, false))

	noBus := &fakeManager{answer: func([]string) (runner.Result, error) {
		return runner.Result{ExitCode: 1, Stderr: []byte("Failed to connect to bus: No medium found")}, nil
	}}
	_, err := installer(t, noBus).Install(ctx, p)
	ce := contract.AsError(err)
	if ce.Code != contract.CodeServiceManagerFailed || !strings.Contains(ce.Message, "loginctl enable-linger") ||
		!strings.Contains(ce.Message, "--system") || !strings.Contains(ce.Message, "Failed to connect to bus") {
		t.Errorf("install without a user bus: %v, want SERVICE_MANAGER_FAILED quoting systemctl and naming enable-linger and --system", err)
	}
	if exit := ce.Code.ExitCode(); exit != 1 {
		t.Errorf("SERVICE_MANAGER_FAILED exits %d, want 1", exit)
	}

	missing := &fakeManager{answer: func(args []string) (runner.Result, error) {
		return runner.Result{}, fmt.Errorf("start %s: %w", args[0], exec.ErrNotFound)
	}}
	_, err = installer(t, missing).Install(ctx, p)
	if ce := contract.AsError(err); ce.Code != contract.CodeServiceUnsupported || !strings.Contains(ce.Message, "systemctl") {
		t.Errorf("install without systemctl: %v, want SERVICE_UNSUPPORTED naming systemctl", err)
	}

	in := installer(t, noBus)
	if err := os.MkdirAll(filepath.Dir(filepath.Join(in.Root, p.Path)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in.Root, p.Path), p.File, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := in.Status(ctx, p)
	if err != nil || !st.Installed || st.Error == nil || st.Error.Code != contract.CodeServiceManagerFailed {
		t.Errorf("status without a user bus: %+v, %v; want installed, with the manager's error", st, err)
	}
}

// Status reads what the manager says: systemctl show's properties, and
// launchctl print's state and pid (a service launchd does not know is
// not loaded, not an error).
func TestStatusReadsWhatTheManagerSays(t *testing.T) {
	ctx := context.Background()
	lin := plan(t, "linux", spec("/Users/me/.simlock", contract.ModeWorker, false))
	mac := plan(t, "darwin", spec("/Users/me/.simlock", contract.ModeWorker, false))
	show := "LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\nUnitFileState=enabled\n"
	print, err := os.ReadFile("testdata/launchctl-print.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    Plan
		out  runner.Result
		file bool
		want State
		call string
	}{
		{"systemd running", lin, runner.Result{Stdout: []byte(show)}, true,
			State{Installed: true, Loaded: true, Running: true, PID: 4242},
			"systemctl --user show simlock.service --property=LoadState,ActiveState,SubState,MainPID,UnitFileState"},
		{"systemd stopped", lin, runner.Result{Stdout: []byte("LoadState=loaded\nActiveState=inactive\nSubState=dead\nMainPID=0\nUnitFileState=enabled\n")}, true,
			State{Installed: true, Loaded: true}, ""},
		{"systemd not installed", lin, runner.Result{ExitCode: 1, Stderr: []byte("Failed to connect to bus: No medium found")}, false,
			State{}, ""},
		{"launchd running", mac, runner.Result{Stdout: print}, true,
			State{Installed: true, Loaded: true, Running: true, PID: 80211}, "launchctl print gui/501/dev.simlock.daemon"},
		{"launchd not loaded", mac, runner.Result{ExitCode: 113, Stderr: []byte("Could not find service \"dev.simlock.daemon\" in domain for user gui: 501")}, true,
			State{Installed: true}, ""},
	} {
		f := &fakeManager{answer: func([]string) (runner.Result, error) { return c.out, nil }}
		in := installer(t, f)
		if c.file {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(in.Root, c.p.Path)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(in.Root, c.p.Path), c.p.File, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		st, err := in.Status(ctx, c.p)
		if err != nil || st != c.want {
			t.Errorf("%s: status %+v, %v; want %+v", c.name, st, err, c.want)
		}
		if c.call != "" && (len(f.calls) != 1 || f.calls[0] != c.call) {
			t.Errorf("%s: ran %q, want %q", c.name, f.calls, c.call)
		}
	}
}

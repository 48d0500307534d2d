package service

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/testtool"

	"howett.net/plist"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/termtest"
)

// oddHome is a home path with everything a file format must quote: spaces,
// both quotes, a backslash, '%' (a systemd specifier), '$' (a systemd
// variable), '&' and '<' (XML).
const oddHome = `/Users/me/My "sim" lock's 100% $HOME & <x>\y`

func spec(home string, mode string, system bool) Spec {
	return Spec{
		Home: home, Binary: "/opt/simlock/bin/simlock", Mode: mode, System: system,
		User: "me", UID: 501, UserHome: "/Users/me",
		Env: []EnvVar{{"PATH", "/opt/homebrew/bin:/usr/bin:/bin"}, {"ANDROID_HOME", "/Users/me/Library/Android/sdk"}},
	}
}

func plan(t *testing.T, goos string, s Spec) Plan {
	t.Helper()
	p, err := For(goos, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// What the service files say is read by launchd and systemd and by the
// people who look at them: the golden files are both.
func TestTheServiceFilesAreTheGoldenOnes(t *testing.T) {
	for _, c := range []struct {
		golden string
		goos   string
		spec   Spec
	}{
		{"launchd-worker.plist", "darwin", spec("/Users/me/.simlock", contract.ModeWorker, false)},
		{"launchd-gateway-odd-home.plist", "darwin", spec(oddHome, contract.ModeGateway, false)},
		{"systemd-user-worker.service", "linux", spec("/Users/me/.simlock", contract.ModeWorker, false)},
		{"systemd-user-odd-home.service", "linux", spec(oddHome, contract.ModeWorker, false)},
		{"systemd-system-gateway.service", "linux", spec("/Users/me/.simlock", contract.ModeGateway, true)},
	} {
		termtest.Golden(t, c.golden, plan(t, c.goos, c.spec).File)
	}
}

// The plist is a property list a real parser reads back to exactly the
// values it was made from, whatever the home's path holds.
func TestThePlistParsesBackToItsValues(t *testing.T) {
	for _, home := range []string{"/Users/me/.simlock", oddHome, "/Users/me/ümlaut ホーム"} {
		for _, mode := range []string{contract.ModeWorker, contract.ModeGateway} {
			s := spec(home, mode, false)
			p := plan(t, "darwin", s)
			var got struct {
				Label                string            `plist:"Label"`
				ProgramArguments     []string          `plist:"ProgramArguments"`
				EnvironmentVariables map[string]string `plist:"EnvironmentVariables"`
				RunAtLoad            bool              `plist:"RunAtLoad"`
				KeepAlive            map[string]bool   `plist:"KeepAlive"`
				ProcessType          string            `plist:"ProcessType"`
				StandardOutPath      string            `plist:"StandardOutPath"`
				StandardErrorPath    string            `plist:"StandardErrorPath"`
			}
			format, err := plist.Unmarshal(p.File, &got)
			if err != nil {
				t.Fatalf("home %q: the plist does not parse: %v\n%s", home, err, p.File)
			}
			if format != plist.XMLFormat {
				t.Errorf("home %q: plist format %d, want XML", home, format)
			}
			wantArgs := append([]string{s.Binary}, args(s)...)
			if got.Label != p.Name || !slices.Equal(got.ProgramArguments, wantArgs) {
				t.Errorf("home %q: Label %q ProgramArguments %q, want %q %q", home, got.Label, got.ProgramArguments, p.Name, wantArgs)
			}
			if got.EnvironmentVariables["SIMLOCK_HOME"] != home || got.EnvironmentVariables["PATH"] != s.Env[0].Value {
				t.Errorf("home %q: EnvironmentVariables %q", home, got.EnvironmentVariables)
			}
			if !got.RunAtLoad || got.KeepAlive["SuccessfulExit"] || len(got.KeepAlive) != 1 || got.ProcessType != "Interactive" {
				t.Errorf("home %q: RunAtLoad %v KeepAlive %v ProcessType %q, want true, {SuccessfulExit: false}, Interactive",
					home, got.RunAtLoad, got.KeepAlive, got.ProcessType)
			}
			if got.StandardOutPath != filepath.Join(home, LaunchdStdout) || got.StandardErrorPath != filepath.Join(home, LaunchdStderr) {
				t.Errorf("home %q: StandardOutPath %q StandardErrorPath %q", home, got.StandardOutPath, got.StandardErrorPath)
			}
		}
	}
}

// Each value goes into the unit quoted for its directive: a word of
// ExecStart (quotes, backslashes, specifiers and variables escaped), an
// Environment assignment (no variables there), free text.
func TestUnitValuesAreQuotedForTheirDirective(t *testing.T) {
	for _, c := range []struct {
		in, exec, env, text string
	}{
		{"/usr/bin/simlock", `"/usr/bin/simlock"`, `"K=/usr/bin/simlock"`, "/usr/bin/simlock"},
		{"/a b", `"/a b"`, `"K=/a b"`, "/a b"},
		{"/100%/h", `"/100%%/h"`, `"K=/100%%/h"`, "/100%%/h"},
		{"/%h", `"/%%h"`, `"K=/%%h"`, "/%%h"},
		{"/$HOME/${X}", `"/$$HOME/$${X}"`, `"K=/$HOME/${X}"`, "/$HOME/${X}"},
		{`/say "hi"`, `"/say \"hi\""`, `"K=/say \"hi\""`, `/say "hi"`},
		{`/back\slash\`, `"/back\\slash\\"`, `"K=/back\\slash\\"`, `/back\slash\`},
		{`/it's`, `"/it's"`, `"K=/it's"`, `/it's`},
		{`/;x`, `"/;x"`, `"K=/;x"`, `/;x`},
	} {
		if got := unitExecArg(c.in); got != c.exec {
			t.Errorf("unitExecArg(%q) = %s, want %s", c.in, got, c.exec)
		}
		if got := unitEnvironment(EnvVar{"K", c.in}); got != c.env {
			t.Errorf("unitEnvironment(K=%q) = %s, want %s", c.in, got, c.env)
		}
		if got := unitSpecifiers(c.in); got != c.text {
			t.Errorf("unitSpecifiers(%q) = %s, want %s", c.in, got, c.text)
		}
	}
}

// A value that would end a unit's line or that a plist cannot hold, a
// relative path, an unknown mode or a user name with odd characters is
// refused before anything is rendered.
func TestASpecNoFileCanCarryIsRefused(t *testing.T) {
	ok := spec("/Users/me/.simlock", contract.ModeWorker, false)
	for _, c := range []struct {
		name  string
		field string
		edit  func(*Spec)
	}{
		{"a newline in the home", "home", func(s *Spec) { s.Home = "/Users/me/a\nExecStartPre=/bin/rm" }},
		{"a relative home", "home", func(s *Spec) { s.Home = "simlock" }},
		{"a NUL in the binary", "binary", func(s *Spec) { s.Binary = "/bin/sim\x00lock" }},
		{"invalid UTF-8 in the home", "home", func(s *Spec) { s.Home = "/Users/me/\xff" }},
		{"a relative user home", "userHome", func(s *Spec) { s.UserHome = "" }},
		{"an unknown mode", "mode", func(s *Spec) { s.Mode = "fleet" }},
		{"a user with a space", "user", func(s *Spec) { s.User = "me you" }},
		{"a user with a specifier", "user", func(s *Spec) { s.User = "%u" }},
		{"a carriage return in an environment value", "PATH", func(s *Spec) { s.Env = []EnvVar{{"PATH", "/bin\r"}} }},
		{"an environment name with '='", "env", func(s *Spec) { s.Env = []EnvVar{{"A=B", "x"}} }},
	} {
		s := ok
		c.edit(&s)
		for _, goos := range []string{"darwin", "linux"} {
			_, err := For(goos, s)
			ce := contract.AsError(err)
			if err == nil || ce.Code != contract.CodeBadRequest || ce.Details["field"] != c.field {
				t.Errorf("%s on %s: err = %v, want BAD_REQUEST field %s", c.name, goos, err, c.field)
			}
		}
	}
	if _, err := For("linux", ok); err != nil {
		t.Errorf("the unedited spec: %v", err)
	}
}

// An operating system without launchd or systemd, and a system unit on
// macOS, are SERVICE_UNSUPPORTED, saying what to do instead.
func TestUnsupportedSystemsAreSaidSo(t *testing.T) {
	for _, c := range []struct {
		goos   string
		system bool
		say    string
	}{
		{"windows", false, "simlock daemon run"},
		{"freebsd", true, "simlock daemon run"},
		{"darwin", true, "GUI session"},
	} {
		_, err := For(c.goos, spec("/Users/me/.simlock", contract.ModeWorker, c.system))
		ce := contract.AsError(err)
		if err == nil || ce.Code != contract.CodeServiceUnsupported || !strings.Contains(ce.Message, c.say) {
			t.Errorf("%s system=%v: err = %v, want SERVICE_UNSUPPORTED saying %q", c.goos, c.system, err, c.say)
		}
	}
}

// The default home of a user's own service has the plain names; another
// home, and every system unit, has a name of its own, stable for the
// home, so several homes coexist.
func TestEachHomeHasAServiceNameOfItsOwn(t *testing.T) {
	def := spec("/Users/me/.simlock", contract.ModeWorker, false)
	other := spec("/Users/me/work-home", contract.ModeWorker, false)
	for _, c := range []struct {
		goos string
		s    Spec
		name string
		path string
	}{
		{"darwin", def, "dev.simlock.daemon", "/Users/me/Library/LaunchAgents/dev.simlock.daemon.plist"},
		{"linux", def, "simlock.service", "/Users/me/.config/systemd/user/simlock.service"},
		{"darwin", other, "dev.simlock.daemon.", "/Users/me/Library/LaunchAgents/dev.simlock.daemon."},
		{"linux", other, "simlock-", "/Users/me/.config/systemd/user/simlock-"},
		{"linux", spec("/Users/me/.simlock", contract.ModeWorker, true), "simlock-", "/etc/systemd/system/simlock-"},
	} {
		p := plan(t, c.goos, c.s)
		if !strings.HasPrefix(p.Name, c.name) || !strings.HasPrefix(p.Path, c.path) || filepath.Base(p.Path) != p.Name+map[string]string{"darwin": ".plist", "linux": ""}[c.goos] {
			t.Errorf("%s %s system=%v: name %q path %q, want %q… at %q…", c.goos, c.s.Home, c.s.System, p.Name, p.Path, c.name, c.path)
		}
		if c.name[len(c.name)-1] == '.' || c.name[len(c.name)-1] == '-' {
			again := plan(t, c.goos, c.s)
			if again.Name != p.Name || p.Name == plan(t, c.goos, spec("/Users/me/third", contract.ModeWorker, c.s.System)).Name {
				t.Errorf("%s %s: name %q is not one stable name per home", c.goos, c.s.Home, p.Name)
			}
		}
	}
}

// Every unit simlock writes passes systemd's own check (systemd-analyze
// verify), homes that need quoting included; verify reports bad lines
// without failing, so any line about the unit fails the test.
func TestTheUnitPassesSystemdAnalyzeVerify(t *testing.T) {
	analyze := testtool.Find(t, "install Debian's systemd package (apt-get install -y systemd)", "systemd-analyze")
	// ExecStart's program must exist for verify: this test's binary does.
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, home := range []string{"/home/me/.simlock", oddHome} {
		for _, system := range []bool{false, true} {
			s := spec(home, contract.ModeWorker, system)
			s.Binary, s.UserHome = bin, "/home/me"
			if system {
				s.User = "root" // verify checks that User= exists
			}
			p := plan(t, "linux", s)
			verifyUnit(t, analyze, p.Name, p.File)
		}
	}
}

func verifyUnit(t *testing.T, analyze, name string, unit []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify %s: %v\n%s\n%s", name, err, out, unit)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, name) {
			t.Errorf("systemd-analyze verify says of the unit: %s\n%s", line, unit)
		}
	}
}

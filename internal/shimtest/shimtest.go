// Package shimtest builds the fake platform tools in testdata/shims and lays
// them out as a Mac's PATH (xcrun, xcodebuild) or an Android SDK
// (cmdline-tools/latest/bin/avdmanager and sdkmanager, emulator/emulator,
// platform-tools/adb, and the system images DefaultAndroidImages names),
// each with its own state directory. The shims can download too
// (xcodebuild -downloadPlatform, sdkmanager --install); Set, HangNext and
// FailNext change how. Tests of the drivers, the daemon and the CLI use it;
// it is not part of simlock itself.
//
// Build is safe for concurrent use; it compiles the shims once per process.
package shimtest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// binaryPath compiles the shims once per process and returns the binary.
// The binary lives in a directory named for a hash of the shims' sources
// and the Go version, so later runs reuse it instead of leaving a fresh
// copy behind each time.
func binaryPath() (string, error) {
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(file), "testdata", "shims")
		sum, err := sourceHash(src)
		if err != nil {
			buildErr = err
			return
		}
		dir := filepath.Join(os.TempDir(), "simlock-shims-"+sum)
		binary = filepath.Join(dir, "shims")
		if _, err := os.Stat(binary); err == nil {
			return
		}
		tmp, err := os.MkdirTemp("", "simlock-shims-build")
		if err != nil {
			buildErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(tmp, "shims"), ".")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(tmp)
			buildErr = fmt.Errorf("build shims: %v\n%s", err, out)
			return
		}
		// Another test process may have finished first: keep theirs.
		if err := os.Rename(tmp, dir); err != nil {
			os.RemoveAll(tmp)
			if _, statErr := os.Stat(binary); statErr != nil {
				buildErr = fmt.Errorf("install shims: %w", err)
			}
		}
	})
	return binary, buildErr
}

// sourceHash names a build of the shims: their sources and the toolchain.
func sourceHash(dir string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version())
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Env is a laid-out set of shims.
type Env struct {
	// Bin holds xcrun and xcodebuild: put it first on PATH.
	Bin string
	// SDK is a fake Android SDK root: set ANDROID_HOME to it.
	SDK string
	// State is the shims' state directory: set SIMLOCK_SHIM_STATE to it.
	State string
}

// Build lays out a fresh set of shims under a temporary directory.
func Build(tb testing.TB) Env {
	tb.Helper()
	bin, err := binaryPath()
	if err != nil {
		tb.Fatal(err)
	}
	root, err := os.MkdirTemp("", "shm")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(root) })
	e := Env{Bin: filepath.Join(root, "bin"), SDK: filepath.Join(root, "sdk"), State: filepath.Join(root, "state")}
	links := map[string]string{
		filepath.Join(e.Bin, "xcrun"):                                        bin,
		filepath.Join(e.Bin, "xcodebuild"):                                   bin,
		filepath.Join(e.SDK, "cmdline-tools", "latest", "bin", "avdmanager"): bin,
		filepath.Join(e.SDK, "cmdline-tools", "latest", "bin", "sdkmanager"): bin,
		filepath.Join(e.SDK, "emulator", "emulator"):                         bin,
		filepath.Join(e.SDK, "platform-tools", "adb"):                        bin,
	}
	for link, target := range links {
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.MkdirAll(e.State, 0o700); err != nil {
		tb.Fatal(err)
	}
	for _, img := range DefaultAndroidImages() {
		if err := e.layOutImage(img); err != nil {
			tb.Fatal(err)
		}
	}
	return e
}

// DefaultAndroidImages are the system images a fresh SDK has installed, as
// package paths: API 34 and 36 with Google APIs, and API 35 with both
// Google APIs and Wear OS, all for the host's ABI.
func DefaultAndroidImages() []string {
	abi := "x86_64"
	if runtime.GOARCH == "arm64" {
		abi = "arm64-v8a"
	}
	return []string{
		"system-images;android-34;google_apis;" + abi,
		"system-images;android-35;android-wear;" + abi,
		"system-images;android-35;google_apis;" + abi,
		"system-images;android-36;google_apis;" + abi,
	}
}

// AddAndroidImage installs system image pkg
// (system-images;android-<api>;<tag>;<abi>) in the SDK, as sdkmanager
// would have.
func (e Env) AddAndroidImage(tb testing.TB, pkg string) {
	tb.Helper()
	if len(strings.Split(pkg, ";")) != 4 {
		tb.Fatalf("AddAndroidImage(%q): not a system image package", pkg)
	}
	if err := e.layOutImage(pkg); err != nil {
		tb.Fatal(err)
	}
}

// layOutImage installs system image pkg in the SDK as sdkmanager would: its
// directory, a source.properties and a small system.img.
func (e Env) layOutImage(pkg string) error {
	parts := strings.Split(pkg, ";")
	dir := filepath.Join(e.SDK, parts[0], parts[1], parts[2], parts[3])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	props := fmt.Sprintf("AndroidVersion.ApiLevel=%s\nPkg.Revision=9\nSystemImage.Abi=%s\nSystemImage.TagId=%s\n",
		strings.TrimPrefix(parts[1], "android-"), parts[3], parts[2])
	if err := os.WriteFile(filepath.Join(dir, "source.properties"), []byte(props), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "system.img"), make([]byte, 8192), 0o644)
}

// Environ is the environment that points programs at these shims, added to
// base (os.Environ() when nil).
func (e Env) Environ(base []string) []string {
	if base == nil {
		base = os.Environ()
	}
	out := make([]string, 0, len(base)+3)
	for _, kv := range base {
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "ANDROID_HOME=") ||
			strings.HasPrefix(kv, "ANDROID_SDK_ROOT=") || strings.HasPrefix(kv, "SIMLOCK_SHIM_STATE=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PATH="+e.Bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"ANDROID_HOME="+e.SDK, "SIMLOCK_SHIM_STATE="+e.State)
}

// Call is one logged shim invocation.
type Call struct {
	Tool string            `json:"tool"`
	Args []string          `json:"args"`
	Env  map[string]string `json:"env,omitempty"`
	At   int64             `json:"at"`
}

// Calls reads every invocation logged so far, oldest first.
func (e Env) Calls(tb testing.TB) []Call {
	tb.Helper()
	f, err := os.Open(filepath.Join(e.State, "calls.jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []Call
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			tb.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// ForgetCalls empties the call log: Calls then reports only what comes
// after (a test's own calls, not its fixture's).
func (e Env) ForgetCalls(tb testing.TB) {
	tb.Helper()
	if err := os.Remove(filepath.Join(e.State, "calls.jsonl")); err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
}

// FailNext makes the next call of tool with subcommand sub exit with code
// and print stderr.
func (e Env) FailNext(tb testing.TB, tool, sub string, code int, stderr string) {
	tb.Helper()
	path := filepath.Join(e.State, "fail-"+tool+"-"+sub)
	if err := os.WriteFile(path, []byte(fmt.Sprintf("%d\n%s", code, stderr)), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// HangNext makes the next install of tool stall until it is killed:
// sub "downloadPlatform" for xcodebuild -downloadPlatform (it stalls at
// 0%), "install" for sdkmanager --install (at its first progress bar).
func (e Env) HangNext(tb testing.TB, tool, sub string) {
	tb.Helper()
	e.FailNext(tb, tool, sub+"-hang", 0, "")
}

// The shims' settings, for Set. A test may also set one for a single
// program with the environment variable SIMLOCK_SHIM_<name>, which wins.
const (
	// SettingDownloadStep is the pause (a Go duration) between the
	// progress redraws of xcodebuild -downloadPlatform and sdkmanager
	// --install; 20ms when unset. A long one lets a test see a download in
	// flight.
	SettingDownloadStep = "DOWNLOAD_STEP"
	// SettingSDKLicenses "unaccepted" makes sdkmanager --install refuse
	// every system image for its license until sdkmanager --licenses has
	// been answered y on stdin.
	SettingSDKLicenses = "SDK_LICENSES"
	// SettingAdbAutoStart "1" makes an adb device command that finds no
	// server on its port start one first, as real adb does, with the
	// command line real adb gives it (adb -L tcp:<port> fork-server
	// server --reply-fd N). Unset, such a command fails.
	SettingAdbAutoStart = "ADB_AUTOSTART"
)

// Set sets one of the shims' settings for every later tool call.
func (e Env) Set(tb testing.TB, name, value string) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(e.State, "setting-"+name), []byte(value), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// SetDownloadStep sets the pause between the shims' download progress
// redraws.
func (e Env) SetDownloadStep(tb testing.TB, d time.Duration) {
	tb.Helper()
	e.Set(tb, SettingDownloadStep, d.String())
}

// RefuseAndroidLicenses makes sdkmanager refuse to install system images
// until its licenses are accepted with sdkmanager --licenses.
func (e Env) RefuseAndroidLicenses(tb testing.TB) {
	tb.Helper()
	e.Set(tb, SettingSDKLicenses, "unaccepted")
}

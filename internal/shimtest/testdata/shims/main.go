// Command shims stands in for the platform tools simlock drives (xcrun,
// xcodebuild, avdmanager, emulator, adb, sdkmanager) in tests on machines
// without Xcode or the Android SDK. One binary serves every tool: it acts as
// the tool named by its file name. It is stateful: what create, boot,
// shutdown, erase and delete do is kept in $SIMLOCK_SHIM_STATE and shows in
// what list prints next. Every call is appended to
// $SIMLOCK_SHIM_STATE/calls.jsonl so tests can check what was run.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// tools maps a tool name to its implementation; each file registers its own
// in init. A tool returns its exit code.
var tools = map[string]func(args []string) int{}

func main() {
	name := filepath.Base(os.Args[0])
	tool, ok := tools[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "shims: no tool %q\n", name)
		os.Exit(127)
	}
	logCall(name, os.Args[1:])
	os.Exit(tool(os.Args[1:]))
}

// stateDir is where the shims keep their state.
func stateDir() string {
	dir := os.Getenv("SIMLOCK_SHIM_STATE")
	if dir == "" {
		fmt.Fprintln(os.Stderr, "shims: SIMLOCK_SHIM_STATE is not set")
		os.Exit(127)
	}
	return dir
}

// Call is one logged invocation.
type Call struct {
	Tool string            `json:"tool"`
	Args []string          `json:"args"`
	Env  map[string]string `json:"env,omitempty"`
	At   int64             `json:"at"`
}

func logCall(tool string, args []string) {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && (strings.HasPrefix(k, "ANDROID_") || strings.HasPrefix(k, "ADB_")) {
			env[k] = v
		}
	}
	b, _ := json.Marshal(Call{Tool: tool, Args: args, Env: env, At: time.Now().UnixMilli()})
	withLock(func() {
		f, err := os.OpenFile(filepath.Join(stateDir(), "calls.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return
		}
		defer f.Close()
		f.Write(append(b, '\n'))
	})
}

// withLock runs f holding the state lock, so concurrent shim processes
// never interleave their read-modify-write of the state files.
func withLock(f func()) {
	lf, err := os.OpenFile(filepath.Join(stateDir(), ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shims: lock:", err)
		os.Exit(127)
	}
	defer lf.Close()
	syscall.Flock(int(lf.Fd()), syscall.LOCK_EX)
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	f()
}

// load reads state file name into v; a missing file leaves v as it is.
// Call it only inside withLock.
func load(name string, v any) {
	b, err := os.ReadFile(filepath.Join(stateDir(), name))
	if err != nil {
		return
	}
	if err := json.Unmarshal(b, v); err != nil {
		fmt.Fprintf(os.Stderr, "shims: %s: %v\n", name, err)
		os.Exit(127)
	}
}

// save writes v to state file name. Call it only inside withLock.
func save(name string, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	tmp := filepath.Join(stateDir(), name+".tmp")
	os.WriteFile(tmp, b, 0o600)
	os.Rename(tmp, filepath.Join(stateDir(), name))
}

// failure lets a test make a tool fail: a file fail-<tool>-<subcommand> in
// the state dir holding "exit code\nstderr text" makes the next matching
// call fail that way (the file is consumed).
func failure(tool, sub string) (int, string, bool) {
	var code int
	var msg string
	found := false
	withLock(func() {
		path := filepath.Join(stateDir(), "fail-"+tool+"-"+sub)
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		os.Remove(path)
		first, rest, _ := strings.Cut(string(b), "\n")
		fmt.Sscanf(first, "%d", &code)
		msg, found = rest, true
	})
	return code, msg, found
}

// setting reads one of the shims' knobs: $SIMLOCK_SHIM_<NAME> when set,
// else the file setting-<NAME> in the state dir (shimtest.Env.Set writes
// it), else "". The environment wins so that one call can differ from the
// rest; the file reaches every tool call of a test without plumbing.
func setting(name string) string {
	if v := os.Getenv("SIMLOCK_SHIM_" + name); v != "" {
		return v
	}
	b, err := os.ReadFile(filepath.Join(stateDir(), "setting-"+name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// settingDuration reads setting name as a Go duration; def when it is
// unset or not a duration.
func settingDuration(name string, def time.Duration) time.Duration {
	d, err := time.ParseDuration(setting(name))
	if err != nil || d < 0 {
		return def
	}
	return d
}

// waitForSignal blocks until the process is told to stop, as a hung
// installer does; SIGTERM's default action then ends it.
func waitForSignal() {
	for {
		time.Sleep(time.Hour)
	}
}

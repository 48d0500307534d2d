package android

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/runner"
)

// SDKRootFrom picks the SDK root from ANDROID_HOME, else ANDROID_SDK_ROOT,
// else the place Android Studio installs it (DefaultSDKRoot) when a
// directory is there: a daemon started by an MCP client often has neither
// variable. "" when none of them gives one.
func SDKRootFrom(getenv func(string) string) string {
	if v := getenv("ANDROID_HOME"); v != "" {
		return v
	}
	if v := getenv("ANDROID_SDK_ROOT"); v != "" {
		return v
	}
	if d := DefaultSDKRoot(runtime.GOOS, getenv("HOME")); d != "" {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return d
		}
	}
	return ""
}

// DefaultSDKRoot is where Android Studio puts the SDK for the user whose
// home is home: ~/Library/Android/sdk on macOS, ~/Android/Sdk on Linux; ""
// elsewhere or without a home.
func DefaultSDKRoot(goos, home string) string {
	if home == "" {
		return ""
	}
	switch goos {
	case "darwin":
		return filepath.Join(home, "Library", "Android", "sdk")
	case "linux":
		return filepath.Join(home, "Android", "Sdk")
	}
	return ""
}

// SDKMissingError is an SDK without the tools the driver needs.
type SDKMissingError struct {
	// Searched lists what was looked for and not found: tool paths, or the
	// environment variables when no SDK root was given.
	Searched []string
}

func (e *SDKMissingError) Error() string {
	return "android SDK not found: missing " + strings.Join(e.Searched, ", ")
}

// sdkTools are the paths of the SDK's tools.
type sdkTools struct {
	root       string
	avdmanager string
	sdkmanager string
	emulator   string
	adb        string
	// cmdline is the cmdline-tools (or legacy tools) package directory
	// holding avdmanager and sdkmanager.
	cmdline string
}

// findTools locates the tools under root and lists what it could not find.
// avdmanager and sdkmanager must come from the same package: the newest
// cmdline-tools/<version>, where "latest" ranks first, else the legacy
// tools/ directory.
func findTools(root string) (sdkTools, []string) {
	if root == "" {
		return sdkTools{}, []string{"$ANDROID_HOME", "$ANDROID_SDK_ROOT"}
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return sdkTools{}, []string{root}
	}
	t := sdkTools{
		root:     root,
		emulator: filepath.Join(root, "emulator", "emulator"),
		adb:      filepath.Join(root, "platform-tools", "adb"),
	}
	var missing []string
	pkgs := cmdlinePackages(root)
	for _, pkg := range pkgs {
		avd, sdk := filepath.Join(pkg, "bin", "avdmanager"), filepath.Join(pkg, "bin", "sdkmanager")
		if executable(avd) && executable(sdk) {
			t.cmdline, t.avdmanager, t.sdkmanager = pkg, avd, sdk
			break
		}
	}
	if t.cmdline == "" {
		latest := filepath.Join(root, "cmdline-tools", "latest", "bin")
		missing = append(missing, filepath.Join(latest, "avdmanager"), filepath.Join(latest, "sdkmanager"))
	}
	for _, p := range []string{t.emulator, t.adb} {
		if !executable(p) {
			missing = append(missing, p)
		}
	}
	return t, missing
}

// cmdlinePackages lists the candidate tool packages, best first.
func cmdlinePackages(root string) []string {
	dir := filepath.Join(root, "cmdline-tools")
	var versions []string
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if e.IsDir() && e.Name() != "latest" && !strings.HasPrefix(e.Name(), ".") {
				versions = append(versions, e.Name())
			}
		}
	}
	slices.SortFunc(versions, func(a, b string) int { return contract.CompareVersions(b, a) })
	out := []string{filepath.Join(dir, "latest")}
	for _, v := range versions {
		out = append(out, filepath.Join(dir, v))
	}
	return append(out, filepath.Join(root, "tools"))
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Prerequisites reports what the Android driver lacks, each with what to do
// about it. It works when New would fail, which is when it is needed.
func Prerequisites(ctx context.Context, opts Options) []driver.Missing {
	miss := func(what, msg, remedy string) driver.Missing {
		return driver.Missing{Platform: contract.PlatformAndroid, Prerequisite: what, Message: msg, Remedy: remedy}
	}
	if opts.SDKRoot == "" {
		return []driver.Missing{miss("android-sdk", "no Android SDK: neither ANDROID_HOME nor ANDROID_SDK_ROOT is set, and there is none where Android Studio puts it (~/Library/Android/sdk on macOS, ~/Android/Sdk on Linux)",
			"install the Android SDK (Android Studio or the command-line tools) and set ANDROID_HOME to it")}
	}
	if fi, err := os.Stat(opts.SDKRoot); err != nil || !fi.IsDir() {
		return []driver.Missing{miss("android-sdk", fmt.Sprintf("the Android SDK %s does not exist", opts.SDKRoot),
			"install the Android SDK there, or point ANDROID_HOME at the SDK you have")}
	}
	t, _ := findTools(opts.SDKRoot)
	var out []driver.Missing
	if t.cmdline == "" {
		out = append(out, miss("cmdline-tools",
			fmt.Sprintf("avdmanager and sdkmanager are missing from %s", filepath.Join(opts.SDKRoot, "cmdline-tools", "latest", "bin")),
			`install the Android SDK Command-line Tools: Android Studio's SDK Manager, or sdkmanager --install "cmdline-tools;latest"`))
	}
	if !executable(t.emulator) {
		out = append(out, miss("emulator", fmt.Sprintf("%s is missing", t.emulator), `sdkmanager --install emulator`))
	}
	if !executable(t.adb) {
		out = append(out, miss("adb", fmt.Sprintf("%s is missing", t.adb), `sdkmanager --install platform-tools`))
	}
	if t.cmdline == "" {
		return out
	}
	// sdkmanager and avdmanager are Java programs: a working
	// `sdkmanager --version` is the cheapest proof of a usable JDK.
	run := opts.Runner
	if run == nil {
		run = runner.OS{}
	}
	res, err := run.Run(ctx, runner.Cmd{Path: t.sdkmanager, Args: []string{"--version"},
		Env: scopedEnv(opts.Env, opts.SDKRoot, opts.Root, DefaultAdbPort), Timeout: callTimeout})
	if err != nil || res.ExitCode != 0 {
		why := firstLine(string(res.Stderr))
		if why == "" {
			why = firstLine(string(res.Stdout))
		}
		if err != nil {
			why = err.Error()
		}
		out = append(out, miss("jdk", "sdkmanager --version failed: "+why,
			"install a Java runtime (JDK 17 or newer) and set JAVA_HOME, or put java on PATH"))
	}
	return out
}

// ToolVersions reports Pkg.Revision of the emulator, platform-tools and
// cmdline-tools packages; a package without source.properties is left out.
func (d *Driver) ToolVersions(context.Context) ([]driver.ToolVersion, error) {
	var out []driver.ToolVersion
	for _, p := range []struct{ name, dir string }{
		{"emulator", filepath.Join(d.sdk.root, "emulator")},
		{"platform-tools", filepath.Join(d.sdk.root, "platform-tools")},
		{"cmdline-tools", d.sdk.cmdline},
	} {
		if v := pkgRevision(p.dir); v != "" {
			out = append(out, driver.ToolVersion{Name: p.name, Version: v})
		}
	}
	return out, nil
}

// pkgRevision reads Pkg.Revision from dir/source.properties; "" if none.
func pkgRevision(dir string) string {
	props, err := readProperties(filepath.Join(dir, "source.properties"))
	if err != nil {
		return ""
	}
	return props["Pkg.Revision"]
}

// readProperties reads a key=value file (source.properties, config.ini,
// an AVD's .ini). Lines without '=' and comments are skipped.
func readProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// errNotExist reports whether err says a file is missing.
func errNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

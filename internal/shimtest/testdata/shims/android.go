package main

// The Android SDK tools: avdmanager and sdkmanager here, emulator in
// android_emulator.go, adb in android_adb.go.
//
// AVDs are real files in $ANDROID_AVD_HOME (<name>.ini and <name>.avd/), as
// avdmanager makes them. Everything else lives in the state directory:
//
//   - android-sdk.json: the installed SDK packages other than system images
//     (sdkmanager), by default emulator, platform-tools and cmdline-tools.
//     System images are their directories in the SDK,
//     system-images/android-<api>/<tag>/<abi>/ with a source.properties, as
//     the real SDK has them; shimtest.Build lays out API 34, 35 (also Wear
//     OS) and 36 for the host's ABI, sdkmanager --install adds one of the
//     fake repository's (API 33 to 37) and --uninstall removes it.
//   - android-emulators.json: the running emulators by console port, with
//     their AVD, pid, the adb server they report to and when they finish
//     booting. An entry whose process died is dropped on the next read.
//   - android-adb-servers.json: the fake adb servers by port, with the
//     emulator adb ports announced to each (host:emulator:<port>).
//
// A running emulator's user data (its installed packages, and the files
// adb shell wrote under /data) is <avd>.avd/shim-userdata.json; snapshots
// are <avd>.avd/snapshots/<name>/ and hold a copy of it, so loading a
// snapshot restores the packages and files, and -wipe-data empties it.
//
// Failure injection (shimtest.Env.FailNext) on top of the usual
// fail-<tool>-<subcommand>; exit code 0 injects an answer on stdout rather
// than an error on stderr:
//   - emulator "boot": the next emulator launch prints the text and exits
//     with the code; "boot-hang": it runs but never finishes booting.
//   - adb: the subcommand and its words joined with "-", longest first, e.g.
//     "emu-avd-snapshot-load", "shell-getprop-sys.boot_completed",
//     "devices".
//   - avdmanager "create" / "delete" / "list"; sdkmanager "version",
//     "list_installed", "install", "uninstall", "licenses", and
//     "install-hang": the next install stalls at its first progress bar
//     until it is killed.
//
// Settings (shimtest.Env.Set, or $SIMLOCK_SHIM_<NAME>): DOWNLOAD_STEP is the
// pause between sdkmanager's progress redraws (default 20ms);
// SDK_LICENSES=unaccepted makes sdkmanager --install refuse every system
// image with its license warning until `sdkmanager --licenses` has been
// answered y twice (review, accept) on stdin.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

func init() {
	tools["avdmanager"] = androidAvdmanager
	tools["sdkmanager"] = androidSdkmanager
	tools["emulator"] = androidEmulatorTool
	tools["adb"] = androidAdb
}

const (
	androidEmulatorsFile = "android-emulators.json"
	androidServersFile   = "android-adb-servers.json"
	androidSDKFile       = "android-sdk.json"
	androidUserdataFile  = "shim-userdata.json"
	// androidProbedMarker, in an AVD's directory, says its boot was asked
	// sys.boot_completed once.
	androidProbedMarker = ".shim-boot-probed"
)

// androidEmulator is one running emulator.
type androidEmulator struct {
	Port       int    `json:"port"`
	Avd        string `json:"avd"`
	AvdDir     string `json:"avdDir"`
	Pid        int    `json:"pid"`
	ServerPort int    `json:"serverPort"`
	StartedAt  int64  `json:"startedAt"` // unix ms
	BootAt     int64  `json:"bootAt"`    // unix ms; 0 never
	Killed     bool   `json:"killed"`
}

func (e androidEmulator) online() bool { return time.Now().UnixMilli() >= e.StartedAt+20 }
func (e androidEmulator) booted() bool { return e.BootAt != 0 && time.Now().UnixMilli() >= e.BootAt }

// androidServer is one fake adb server.
type androidServer struct {
	Port       int  `json:"port"`
	Pid        int  `json:"pid"`
	RejectKill bool `json:"rejectKill"`
	// Announced lists the emulator adb ports announced to it through
	// host:emulator:<port>, oldest first.
	Announced []int `json:"announced,omitempty"`
}

// androidAlive reports whether pid runs; a zombie does not.
func androidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return false
		}
	}
	return true
}

// androidEmulators loads the running emulators, dropping dead ones. Call it
// only inside withLock.
func androidEmulators() map[int]androidEmulator {
	ems := map[int]androidEmulator{}
	load(androidEmulatorsFile, &ems)
	changed := false
	for port, e := range ems {
		if !androidAlive(e.Pid) {
			delete(ems, port)
			changed = true
		}
	}
	if changed {
		save(androidEmulatorsFile, ems)
	}
	return ems
}

// androidAVDHome is where avdmanager and the emulator keep AVDs.
func androidAVDHome() string {
	if v := os.Getenv("ANDROID_AVD_HOME"); v != "" {
		return v
	}
	if v := os.Getenv("ANDROID_USER_HOME"); v != "" {
		return filepath.Join(v, "avd")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".android", "avd")
}

// androidSDKRoot is the SDK the tools belong to: $ANDROID_HOME, else
// $ANDROID_SDK_ROOT, else the one the tool was run from.
func androidSDKRoot() string {
	for _, k := range []string{"ANDROID_HOME", "ANDROID_SDK_ROOT"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	dir := filepath.Dir(os.Args[0])
	if filepath.Base(dir) == "bin" { // cmdline-tools/latest/bin
		return filepath.Dir(filepath.Dir(filepath.Dir(dir)))
	}
	return filepath.Dir(dir) // emulator/, platform-tools/
}

// androidImageDir is where system image package pkg lives, or "" when pkg
// is not a system image.
func androidImageDir(pkg string) string {
	parts := strings.Split(pkg, ";")
	if len(parts) != 4 || parts[0] != "system-images" || !strings.HasPrefix(parts[1], "android-") {
		return ""
	}
	return filepath.Join(androidSDKRoot(), "system-images", parts[1], parts[2], parts[3])
}

// androidImages scans the SDK for installed system images: a directory
// system-images/android-<api>/<tag>/<abi> with a source.properties, as
// sdkmanager leaves a finished install.
func androidImages() []string {
	var out []string
	props, _ := filepath.Glob(filepath.Join(androidSDKRoot(), "system-images", "android-*", "*", "*", "source.properties"))
	for _, p := range props {
		abiDir := filepath.Dir(p)
		tagDir := filepath.Dir(abiDir)
		out = append(out, strings.Join([]string{"system-images", filepath.Base(filepath.Dir(tagDir)), filepath.Base(tagDir), filepath.Base(abiDir)}, ";"))
	}
	return out
}

// androidPackages lists the installed SDK packages: the others from the
// state file, the system images from the SDK's directories. Call it only
// inside withLock.
func androidPackages() []string {
	var st struct {
		Packages []string `json:"packages"`
	}
	load(androidSDKFile, &st)
	if st.Packages == nil {
		st.Packages = []string{"cmdline-tools;latest", "emulator", "platform-tools"}
	}
	pkgs := slices.DeleteFunc(st.Packages, func(p string) bool { return androidImageDir(p) != "" })
	pkgs = append(pkgs, androidImages()...)
	sort.Strings(pkgs)
	return pkgs
}

// androidSavePackages saves the packages that are not system images; those
// are their directories.
func androidSavePackages(pkgs []string) {
	pkgs = slices.DeleteFunc(slices.Clone(pkgs), func(p string) bool { return androidImageDir(p) != "" })
	sort.Strings(pkgs)
	save(androidSDKFile, map[string][]string{"packages": pkgs})
}

// androidImageDesc is sdkmanager's description of a system image.
func androidImageDesc(tag, abi string) string {
	arch := map[string]string{"x86_64": "Intel x86_64 Atom", "arm64-v8a": "ARM 64 v8a"}[abi]
	if arch == "" {
		arch = abi
	}
	name := map[string]string{"google_apis": "Google APIs", "google_apis_playstore": "Google Play", "android-wear": "Wear OS 5"}[tag]
	if name == "" {
		name = tag
	}
	return name + " " + arch + " System Image"
}

// androidDownloadable reports whether the fake repository offers system
// image pkg: API 33 to 37, Google APIs or Play, Wear OS for 34 to 36.
func androidDownloadable(pkg string) bool {
	parts := strings.Split(pkg, ";")
	if len(parts) != 4 || parts[0] != "system-images" {
		return false
	}
	level := strings.TrimPrefix(parts[1], "android-")
	tagOK := parts[2] == "google_apis" || parts[2] == "google_apis_playstore" ||
		(parts[2] == "android-wear" && slices.Contains([]string{"34", "35", "36"}, level))
	return slices.Contains([]string{"33", "34", "35", "36", "37"}, level) && tagOK &&
		(parts[3] == "x86_64" || parts[3] == "arm64-v8a")
}

// androidReadIni reads a key=value file.
func androidReadIni(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out, nil
}

func androidWriteIni(path string, kv map[string]string) error {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, kv[k])
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// androidFail reports an injected failure for tool under any of keys. An
// injected exit code 0 is an injected answer instead: its text goes to
// stdout, where the tool's answer would be.
func androidFail(tool string, keys ...string) (int, bool) {
	for _, k := range keys {
		if code, msg, ok := failure(tool, k); ok {
			if code == 0 {
				fmt.Print(msg)
			} else {
				fmt.Fprint(os.Stderr, msg)
			}
			return code, true
		}
	}
	return 0, false
}

// androidProfile is a device definition avdmanager knows.
type androidProfile struct{ id, name, oem, tag string }

func androidProfiles() []androidProfile {
	return []androidProfile{
		{"automotive_1024p_landscape", "Automotive (1024p landscape)", "Google", "android-automotive-playstore"},
		{"automotive_1080p_landscape", "Automotive (1080p landscape)", "Google", "android-automotive"},
		{"desktop_large", "Large Desktop", "Google", "android-desktop"},
		{"desktop_medium", "Medium Desktop", "Google", "android-desktop"},
		{"medium_phone", "Medium Phone", "Generic", ""},
		{"medium_tablet", "Medium Tablet", "Generic", ""},
		{"pixel_6", "Pixel 6", "Google", ""},
		{"pixel_7", "Pixel 7", "Google", ""},
		{"pixel_8", "Pixel 8", "Google", ""},
		{"pixel_9", "Pixel 9", "Google", ""},
		{"pixel_9_pro", "Pixel 9 Pro", "Google", ""},
		{"pixel_fold", "Pixel Fold", "Google", ""},
		{"pixel_tablet", "Pixel Tablet", "Google", ""},
		{"tv_1080p", "Television (1080p)", "Google", "android-tv"},
		{"tv_4k", "Television (4K)", "Google", "android-tv"},
		{"wearos_large_round", "Wear OS Large Round", "Google", "android-wear"},
		{"wearos_small_round", "Wear OS Small Round", "Google", "android-wear"},
		{"wearos_square", "Wear OS Square", "Google", "android-wear"},
	}
}

// androidFlags reads -x value pairs, also spelled --long value.
func androidFlags(args []string, names map[string]string) (map[string]string, []string) {
	out := map[string]string{}
	var rest []string
	for i := 0; i < len(args); i++ {
		if key, ok := names[args[i]]; ok && i+1 < len(args) {
			out[key] = args[i+1]
			i++
			continue
		}
		rest = append(rest, args[i])
	}
	return out, rest
}

var androidAVDName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

func androidAvdmanager(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "Error: Expected verb and object.\nUsage: avdmanager [global options] [action] [action options]")
		return 1
	}
	if code, failed := androidFail("avdmanager", args[0]); failed {
		return code
	}
	home := androidAVDHome()
	switch args[0] + " " + args[1] {
	case "list device":
		compact := slices.Contains(args[2:], "-c")
		if !compact {
			fmt.Println("Available devices definitions:")
		}
		for i, p := range androidProfiles() {
			if compact {
				fmt.Println(p.id)
				continue
			}
			fmt.Printf("id: %d or \"%s\"\n    Name: %s\n    OEM : %s\n", i, p.id, p.name, p.oem)
			if p.tag != "" {
				fmt.Printf("    Tag : %s\n", p.tag)
			}
			fmt.Println("---------")
		}
		return 0
	case "list avd":
		return androidListAVDs(home, slices.Contains(args[2:], "-c"))
	case "create avd":
		return androidCreateAVD(home, args[2:])
	case "delete avd":
		return androidDeleteAVD(home, args[2:])
	}
	fmt.Fprintf(os.Stderr, "Error: Invalid verb/object '%s %s'.\n", args[0], args[1])
	return 1
}

func androidListAVDs(home string, compact bool) int {
	inis, _ := filepath.Glob(filepath.Join(home, "*.ini"))
	sort.Strings(inis)
	if !compact {
		fmt.Println("Available Android Virtual Devices:")
	}
	for _, ini := range inis {
		name := strings.TrimSuffix(filepath.Base(ini), ".ini")
		props, err := androidReadIni(ini)
		if err != nil {
			continue
		}
		if compact {
			fmt.Println(name)
			continue
		}
		cfg, _ := androidReadIni(filepath.Join(props["path"], "config.ini"))
		fmt.Printf("    Name: %s\n  Device: %s (%s)\n    Path: %s\n  Target: %s\n          Based on: Android API %s Tag/ABI: %s/%s\n---------\n",
			name, cfg["hw.device.name"], cfg["hw.device.manufacturer"], props["path"], cfg["tag.display"],
			strings.TrimPrefix(props["target"], "android-"), cfg["tag.id"], cfg["abi.type"])
	}
	return 0
}

func androidCreateAVD(home string, args []string) int {
	opts, rest := androidFlags(args, map[string]string{
		"-n": "name", "--name": "name", "-k": "package", "--package": "package",
		"-d": "device", "--device": "device", "-p": "path", "--path": "path", "-t": "tag", "--tag": "tag",
	})
	force := slices.Contains(rest, "-f") || slices.Contains(rest, "--force")
	name, pkg := opts["name"], opts["package"]
	if name == "" || pkg == "" {
		fmt.Fprintln(os.Stderr, "Error: The parameters --package, --name must be defined for action 'create avd'")
		return 1
	}
	if !androidAVDName.MatchString(name) {
		fmt.Fprintf(os.Stderr, "Error: AVD name '%s' contains invalid characters.\nAllowed characters are: a-z A-Z 0-9 . _ -\n", name)
		return 1
	}
	var prof *androidProfile
	if id := opts["device"]; id != "" {
		for _, p := range androidProfiles() {
			if p.id == id || p.name == id {
				prof = &p
				break
			}
		}
		if prof == nil {
			fmt.Fprintf(os.Stderr, "Error: No device found matching --device %s.\n", id)
			return 1
		}
	}
	parts := strings.Split(pkg, ";")
	var installed []string
	withLock(func() { installed = androidPackages() })
	if len(parts) != 4 || parts[0] != "system-images" || !slices.Contains(installed, pkg) {
		fmt.Fprintln(os.Stderr, "Error: Package path is not valid. Valid system image paths are:")
		for _, p := range installed {
			if strings.HasPrefix(p, "system-images;") {
				fmt.Fprintln(os.Stderr, p)
			}
		}
		return 1
	}
	dir := filepath.Join(home, name+".avd")
	if opts["path"] != "" {
		dir = opts["path"]
	}
	ini := filepath.Join(home, name+".ini")
	if _, err := os.Stat(ini); err == nil && !force {
		fmt.Fprintf(os.Stderr, "Error: Android Virtual Device '%s' already exists.\nUse --force if you want to replace it.\n", name)
		return 1
	}
	// avdmanager asks this on stdin; the answer is read and ignored.
	fmt.Print("Do you wish to create a custom hardware profile? [no] ")
	bufio.NewReader(os.Stdin).ReadString('\n')
	fmt.Println()
	level, tag, abi := strings.TrimPrefix(parts[1], "android-"), parts[2], parts[3]
	cpuArch, tagDisplay := abi, tag
	if abi == "arm64-v8a" {
		cpuArch = "arm64"
	}
	if tag == "google_apis" {
		tagDisplay = "Google APIs"
	}
	cfg := map[string]string{
		"AvdId":                   name,
		"PlayStore.enabled":       "false",
		"abi.type":                abi,
		"avd.ini.displayname":     name,
		"avd.ini.encoding":        "UTF-8",
		"disk.dataPartition.size": "6442450944",
		"hw.cpu.arch":             cpuArch,
		"hw.ramSize":              "2048",
		"image.sysdir.1":          fmt.Sprintf("system-images/android-%s/%s/%s/", level, tag, abi),
		"tag.display":             tagDisplay,
		"tag.id":                  tag,
	}
	if prof != nil {
		cfg["hw.device.name"] = prof.id
		cfg["hw.device.manufacturer"] = prof.oem
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
	if err := androidWriteIni(filepath.Join(dir, "config.ini"), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
	err := androidWriteIni(ini, map[string]string{
		"avd.ini.encoding": "UTF-8",
		"path":             dir,
		"path.rel":         "avd/" + name + ".avd",
		"target":           "android-" + level,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
	return 0
}

func androidDeleteAVD(home string, args []string) int {
	opts, _ := androidFlags(args, map[string]string{"-n": "name", "--name": "name"})
	name := opts["name"]
	ini := filepath.Join(home, name+".ini")
	props, err := androidReadIni(ini)
	if name == "" || err != nil {
		fmt.Fprintf(os.Stderr, "Error: There is no Android Virtual Device named '%s'.\n", name)
		return 1
	}
	dir := props["path"]
	var busy bool
	withLock(func() {
		for _, e := range androidEmulators() {
			busy = busy || e.AvdDir == dir
		}
	})
	if busy {
		fmt.Fprintf(os.Stderr, "Error: This AVD '%s' is currently running in the Emulator. Please close it and try again.\n", name)
		return 1
	}
	fmt.Printf("Deleting file %s\nDeleting folder %s\n\nAVD '%s' deleted.\n", ini, dir, name)
	os.Remove(ini)
	os.RemoveAll(dir)
	return 0
}

func androidSdkmanager(args []string) int {
	var verb string
	var pkgs []string
	for _, a := range args {
		switch {
		case a == "--version" || a == "--list_installed" || a == "--list" || a == "--install" ||
			a == "--uninstall" || a == "--licenses" || a == "--update":
			verb = strings.TrimPrefix(a, "--")
		case strings.HasPrefix(a, "--"):
			// --sdk_root=, --channel=, --verbose, ...: accepted, ignored
		default:
			pkgs = append(pkgs, a)
		}
	}
	if verb == "" && len(pkgs) > 0 {
		verb = "install"
	}
	if code, failed := androidFail("sdkmanager", verb); failed {
		return code
	}
	switch verb {
	case "version":
		fmt.Println("12.0")
	case "list_installed", "list":
		var installed []string
		withLock(func() { installed = androidPackages() })
		androidPrintPackages(installed)
	case "install":
		if len(pkgs) == 0 {
			fmt.Fprintln(os.Stderr, "Error: No package given")
			return 1
		}
		return androidSDKInstall(pkgs)
	case "uninstall":
		withLock(func() {
			var rest []string
			for _, p := range androidPackages() {
				if !slices.Contains(pkgs, p) {
					rest = append(rest, p)
				} else if dir := androidImageDir(p); dir != "" {
					os.RemoveAll(dir)
				}
			}
			androidSavePackages(rest)
		})
	case "licenses":
		return androidLicenses()
	case "update":
		fmt.Println("No updates available")
	default:
		fmt.Fprintln(os.Stderr, "Usage:\n  sdkmanager [--uninstall] [<common args>] [--package_file=<file>] [<packages>...]\n  sdkmanager --update [<common args>]\n  sdkmanager --list [<common args>]\n  sdkmanager --list_installed [<common args>]\n  sdkmanager --licenses [<common args>]\n  sdkmanager --version")
		return 1
	}
	return 0
}

// androidPrintPackages prints sdkmanager's installed-packages table.
func androidPrintPackages(pkgs []string) {
	type row struct{ path, version, desc, loc string }
	rows := []row{{"Path", "Version", "Description", "Location"}, {"-------", "-------", "-------", "-------"}}
	for _, p := range pkgs {
		r := row{path: p, loc: strings.ReplaceAll(p, ";", "/")}
		switch parts := strings.Split(p, ";"); {
		case p == "emulator":
			r.version, r.desc = "36.1.9", "Android Emulator"
		case p == "platform-tools":
			r.version, r.desc = "36.0.0", "Android SDK Platform-Tools"
		case strings.HasPrefix(p, "cmdline-tools"):
			r.version, r.desc = "19.0", "Android SDK Command-line Tools (latest)"
		case len(parts) == 4 && parts[0] == "system-images":
			props, _ := androidReadIni(filepath.Join(androidImageDir(p), "source.properties"))
			r.version, r.desc = props["Pkg.Revision"], androidImageDesc(parts[2], parts[3])
		default:
			r.version, r.desc = "1", p
		}
		rows = append(rows, r)
	}
	var w [4]int
	for _, r := range rows {
		w = [4]int{max(w[0], len(r.path)), max(w[1], len(r.version)), max(w[2], len(r.desc)), max(w[3], len(r.loc))}
	}
	fmt.Println("Installed packages:")
	for _, r := range rows {
		fmt.Printf("  %-*s | %-*s | %-*s | %s\n", w[0], r.path, w[1], r.version, w[2], r.desc, r.loc)
	}
	fmt.Println()
}

// androidGuest is a running emulator's user data: its installed packages
// and the files written under /data by adb shell. A wipe empties it and a
// snapshot holds a copy of it.
type androidGuest struct {
	Packages []string          `json:"packages"`
	Files    map[string]string `json:"files,omitempty"`
	// Blobs are the files adb push wrote, byte for byte.
	Blobs map[string][]byte `json:"blobs,omitempty"`
}

func androidLoadGuest(dir string) androidGuest {
	var g androidGuest
	if b, err := os.ReadFile(filepath.Join(dir, androidUserdataFile)); err == nil {
		json.Unmarshal(b, &g)
	}
	return g
}

func androidSaveGuest(dir string, g androidGuest) {
	b, _ := json.Marshal(g)
	os.WriteFile(filepath.Join(dir, androidUserdataFile), b, 0o644)
}

// androidUserdata reads an AVD's installed packages.
func androidUserdata(dir string) []string { return androidLoadGuest(dir).Packages }

// androidSaveUserdata replaces an AVD's installed packages, keeping its
// files.
func androidSaveUserdata(dir string, pkgs []string) {
	g := androidLoadGuest(dir)
	g.Packages = pkgs
	androidSaveGuest(dir, g)
}

// androidCopyFile copies src to dst; a missing src removes dst.
func androidCopyFile(src, dst string) {
	b, err := os.ReadFile(src)
	if err != nil {
		os.Remove(dst)
		return
	}
	os.WriteFile(dst, b, 0o644)
}

// androidLicensesFile records that `sdkmanager --licenses` was answered
// with y.
const androidLicensesFile = "android-licenses-accepted"

// androidLicensesPending reports whether an install would be refused for
// its license: setting SDK_LICENSES is "unaccepted" and --licenses has not
// been answered yet.
func androidLicensesPending() bool {
	if setting("SDK_LICENSES") != "unaccepted" {
		return false
	}
	_, err := os.Stat(filepath.Join(stateDir(), androidLicensesFile))
	return err != nil
}

// androidSDKInstall installs packages as `sdkmanager --install` does: a
// system image becomes its directory, with a progress bar redrawn on
// stdout a step (setting DOWNLOAD_STEP) apart; anything else is only
// recorded. A package the fake repository lacks, or whose license is not
// accepted, is refused with sdkmanager's warning. Failure key
// "install-hang" makes the next install stall at its first bar until it is
// killed.
func androidSDKInstall(pkgs []string) int {
	for _, p := range pkgs {
		dir := androidImageDir(p)
		if dir == "" {
			continue
		}
		if !androidDownloadable(p) {
			fmt.Fprintf(os.Stderr, "Warning: Failed to find package '%s'\n", p)
			return 1
		}
		if androidLicensesPending() {
			parts := strings.Split(p, ";")
			desc := androidImageDesc(parts[2], parts[3])
			fmt.Printf("Checking the license for package %s in %s\n", desc, filepath.Join(androidSDKRoot(), "licenses"))
			fmt.Fprintf(os.Stderr, "Warning: License for package %s not accepted.\n", desc)
			return 1
		}
	}
	_, _, hang := failure("sdkmanager", "install-hang")
	step := settingDuration("DOWNLOAD_STEP", 20*time.Millisecond)
	for _, p := range pkgs {
		dir := androidImageDir(p)
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "source.properties")); err == nil {
			continue // installed: sdkmanager has nothing to do
		}
		parts := strings.Split(p, ";")
		level, tag, abi := strings.TrimPrefix(parts[1], "android-"), parts[2], parts[3]
		zip := fmt.Sprintf("%s-%s_r09.zip", abi, level)
		bar := func(pct int, what string) {
			fmt.Printf("[%-39s] %d%% %s\r", strings.Repeat("=", pct*39/100), pct, what)
		}
		bar(0, "Downloading "+zip+"...")
		if hang {
			waitForSignal()
		}
		for _, pct := range []int{20, 45, 70} {
			time.Sleep(step)
			bar(pct, "Downloading "+zip+"...")
		}
		time.Sleep(step)
		bar(100, "Unzipping... "+abi+"/system.img")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "Error:", err)
			return 1
		}
		os.WriteFile(filepath.Join(dir, "system.img"), make([]byte, 4096), 0o644)
		err := androidWriteIni(filepath.Join(dir, "source.properties"), map[string]string{
			"AndroidVersion.ApiLevel": level,
			"Pkg.Desc":                androidImageDesc(tag, abi),
			"Pkg.Revision":            "1",
			"SystemImage.Abi":         abi,
			"SystemImage.TagId":       tag,
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "Error:", err)
			return 1
		}
	}
	withLock(func() {
		installed := androidPackages()
		for _, p := range pkgs {
			if !slices.Contains(installed, p) {
				installed = append(installed, p)
			}
		}
		androidSavePackages(installed)
	})
	fmt.Println()
	return 0
}

// androidLicenses is `sdkmanager --licenses`: with a license pending it
// asks to review it and to accept it, one y/N answer each on stdin.
func androidLicenses() int {
	if !androidLicensesPending() {
		fmt.Println("All SDK package licenses accepted.")
		return 0
	}
	in := bufio.NewReader(os.Stdin)
	ask := func(q string) bool {
		fmt.Print(q)
		line, _ := in.ReadString('\n')
		fmt.Println()
		return strings.EqualFold(strings.TrimSpace(line), "y")
	}
	fmt.Println("1 of 1 SDK package license not accepted.")
	if !ask("Review license that has not been accepted (y/N)? ") {
		return 0
	}
	fmt.Println("License android-sdk-license:\n---------------------------------------\nTerms and Conditions (shortened by the shim)\n---------------------------------------")
	if !ask("Accept? (y/N): ") {
		fmt.Println("1 license not accepted")
		return 0
	}
	os.WriteFile(filepath.Join(stateDir(), androidLicensesFile), nil, 0o600)
	fmt.Println("All SDK package licenses accepted")
	return 0
}

package main

// The Xcode tools: xcrun (only `xcrun simctl …`) and xcodebuild.
//
// simctl keeps its devices per device set in $SIMLOCK_SHIM_STATE/ios-simctl.json.
// A call with `--set DIR` sees only the devices of DIR; a call without it sees
// only the "default set", as the real tool does with the user's own
// simulators. Tests use the default set to prove the driver never reaches a
// device outside its root: a UDID from one set is an "Invalid device" in
// any other.
//
// Supported:
//
//	simctl [--set DIR] list [-j] [devicetypes] [runtimes] [devices]
//	simctl [--set DIR] create NAME TYPE RUNTIME     prints the new UDID
//	simctl [--set DIR] boot UDID                    149 when already booted
//	simctl [--set DIR] bootstatus UDID [-b]         waits 50 ms; 0 if booted, 149 if not
//	simctl [--set DIR] shutdown UDID|all            149 when already shut down
//	simctl [--set DIR] erase UDID|all               the device must be shut down
//	simctl [--set DIR] delete UDID|all|unavailable  the device must be shut down
//	simctl [--set DIR] spawn UDID /bin/sh -c SCRIPT  a booted device; see iosSpawn
//	simctl --set DIR install|listapps|get_app_container|io …  see ios_files.go
//	simctl [--set DIR] runtime list [-j]            the installed runtime disk images
//	simctl [--set DIR] runtime delete IMAGE         the set makes no difference
//	simctl [--set DIR] io|openurl|install|launch|… DEV …  DEV is a UDID or booted (the first
//	                                                 booted device of the set); the device must
//	                                                 be booted; prints the command with DEV
//	                                                 resolved, and io DEV screenshot FILE writes
//	                                                 FILE on the host
//	simctl [--set DIR] pbcopy DEV                   prints DEV's UDID and what stdin held
//	simctl …anything else…                          prints its arguments, exits 0
//	xcodebuild -version | -license check | -checkFirstLaunchStatus
//	xcodebuild -downloadPlatform iOS [-buildVersion V]
//
// With a set, create also makes DIR/UDID/data, erase empties it and delete
// removes DIR/UDID, as CoreSimulator lays out a set on disk.
//
// Runtimes are machine-wide and kept in $SIMLOCK_SHIM_STATE/ios-runtimes.json:
// a fresh state has iOS 17.5, 18.2 (broken), 18.6 and 26.1, tvOS 26.1 and
// watchOS 26.1; -downloadPlatform adds iOS 18.4 or 26.4 (the newest, which
// "latest" gets) and runtime delete removes one. A download prints
// xcodebuild's progress on stderr with a pause of setting DOWNLOAD_STEP
// (default 20ms) between redraws; a longer one lets a test watch a download
// in flight.
//
// Failures are injected per subcommand with the harness's fail-<tool>-<sub>
// files: sub is the simctl subcommand ("boot", "list", …) for xcrun, with
// "runtime-list" and "runtime-delete" for the runtime subcommands, and the
// first option without its dash ("version", "license",
// "checkFirstLaunchStatus", "downloadPlatform") for xcodebuild;
// "downloadPlatform-hang" makes the next download stall at 0% until it is
// killed.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func init() {
	tools["xcrun"] = iosXcrun
	tools["xcodebuild"] = iosXcodebuild
}

// iosStateFile holds every device set's devices.
const iosStateFile = "ios-simctl.json"

// iosBootstatusWait stands in for the time a simulator takes to boot.
const iosBootstatusWait = 50 * time.Millisecond

// The exit codes simctl uses: 148 for a bad argument (an unknown device,
// type or runtime), 149 for an operation the device's state forbids.
const (
	iosExitInvalid = 148
	iosExitState   = 149
)

type iosDevice struct {
	UDID         string `json:"udid"`
	Name         string `json:"name"`
	DeviceTypeID string `json:"deviceTypeIdentifier"`
	RuntimeID    string `json:"runtimeIdentifier"`
	State        string `json:"state"`
	LastBootedAt string `json:"lastBootedAt,omitempty"`
}

type iosState struct {
	// Sets maps a device set's absolute path to its devices, oldest first;
	// "" is the default set.
	Sets map[string][]iosDevice `json:"sets"`
}

// iosDeviceType and iosRuntime describe the catalog the shim serves.
type iosDeviceType struct {
	name, id, family, model string
	// min and max are CoreSimulator's 0xAABBCC-encoded runtime bounds.
	min, max uint32
}

type iosRuntime struct {
	platform, version, build string
	available                bool
	supports                 []string // device type names
	// preinstalled: installed in a fresh state; any other iOS runtime of
	// the table is only downloadable.
	preinstalled bool
	// image is the installed runtime's disk image identifier (a UUID).
	image string
}

const iosUnbounded = 4294967295

func iosVer(major, minor, patch uint32) uint32 { return major<<16 | minor<<8 | patch }

func iosDeviceTypes() []iosDeviceType {
	return []iosDeviceType{
		{"iPhone 17", "com.apple.CoreSimulator.SimDeviceType.iPhone-17", "iPhone", "iPhone18,3", iosVer(26, 0, 0), iosUnbounded},
		{"iPhone 16", "com.apple.CoreSimulator.SimDeviceType.iPhone-16", "iPhone", "iPhone17,3", iosVer(18, 0, 0), iosUnbounded},
		{"iPhone 15", "com.apple.CoreSimulator.SimDeviceType.iPhone-15", "iPhone", "iPhone15,4", iosVer(17, 0, 0), iosUnbounded},
		{"iPhone Xs", "com.apple.CoreSimulator.SimDeviceType.iPhone-XS", "iPhone", "iPhone11,2", iosVer(12, 0, 0), iosUnbounded},
		{"iPhone 8", "com.apple.CoreSimulator.SimDeviceType.iPhone-8", "iPhone", "iPhone10,4", iosVer(11, 0, 0), iosVer(16, 255, 255)},
		{"iPad Pro 11-inch (M5)", "com.apple.CoreSimulator.SimDeviceType.iPad-Pro-11-inch-M5-12GB", "iPad", "iPad17,1", iosVer(26, 0, 0), iosUnbounded},
		{"iPad Air 11-inch (M3)", "com.apple.CoreSimulator.SimDeviceType.iPad-Air-11-inch-M3", "iPad", "iPad15,3", iosVer(18, 4, 0), iosUnbounded},
		{"iPad (A16)", "com.apple.CoreSimulator.SimDeviceType.iPad-A16", "iPad", "iPad15,7", iosVer(18, 4, 0), iosUnbounded},
		{"Apple Watch Series 11 (46mm)", "com.apple.CoreSimulator.SimDeviceType.Apple-Watch-Series-11-46mm", "Apple Watch", "Watch7,20", iosVer(26, 0, 0), iosUnbounded},
		{"Apple TV 4K (3rd generation)", "com.apple.CoreSimulator.SimDeviceType.Apple-TV-4K-3rd-generation-4K", "Apple TV", "AppleTV14,1", iosVer(16, 1, 0), iosUnbounded},
		{"Apple Vision Pro", "com.apple.CoreSimulator.SimDeviceType.Apple-Vision-Pro", "Apple Vision", "RealityDevice14,1", iosVer(1, 0, 0), iosUnbounded},
	}
}

// iosRuntimeTable is every runtime the shim knows, installed or not.
// iPhone 17 and the M5 iPad need 26.x, the M3 iPads 18.4 or later, iPhone 8
// stops at 16.x, and iOS 26.1 dropped iPhone Xs although the device type
// sets no maximum (so Xs + 26.1 is installed but unpaired). iOS 18.2 is
// installed but broken, as a runtime whose disk image is gone is. iOS 26.4
// and 18.4 are not installed: xcodebuild -downloadPlatform can add them.
func iosRuntimeTable() []iosRuntime {
	return []iosRuntime{
		{"iOS", "17.5", "21F79", true, []string{"iPhone 15", "iPhone Xs"}, true, ""},
		{"iOS", "18.2", "22C150", false, []string{"iPhone 16", "iPhone 15", "iPhone Xs"}, true, ""},
		{"iOS", "18.4", "22E238", true, []string{"iPhone 16", "iPhone 15", "iPhone Xs", "iPad Air 11-inch (M3)", "iPad (A16)"}, false, ""},
		{"iOS", "18.6", "22G86", true, []string{"iPhone 16", "iPhone 15", "iPhone Xs", "iPad Air 11-inch (M3)", "iPad (A16)"}, true, ""},
		{"iOS", "26.1", "23B86", true, []string{"iPhone 17", "iPhone 16", "iPhone 15", "iPad Pro 11-inch (M5)", "iPad Air 11-inch (M3)", "iPad (A16)"}, true, ""},
		{"iOS", "26.4", "23E244", true, []string{"iPhone 17", "iPhone 16", "iPhone 15", "iPad Pro 11-inch (M5)", "iPad Air 11-inch (M3)", "iPad (A16)"}, false, ""},
		{"tvOS", "26.1", "23J579", true, []string{"Apple TV 4K (3rd generation)"}, true, ""},
		{"watchOS", "26.1", "23S36", true, []string{"Apple Watch Series 11 (46mm)"}, true, ""},
	}
}

// iosRuntimeStateFile holds the installed runtimes.
const iosRuntimeStateFile = "ios-runtimes.json"

// iosDeleteLag is how long a deleted runtime's image stays listed by
// `runtime list` in state Deleting, as CoreSimulator deletes in the
// background.
const iosDeleteLag = 40 * time.Millisecond

// iosInstall is an installed runtime.
type iosInstall struct {
	Platform string `json:"platform"`
	Version  string `json:"version"`
	Image    string `json:"image"`
	// Broken: installed, but its disk image is unusable.
	Broken bool `json:"broken,omitempty"`
	// DeletedAt (unix ms) is when `runtime delete` was run on it.
	DeletedAt int64 `json:"deletedAt,omitempty"`
}

type iosRuntimeState struct {
	Initialized bool         `json:"initialized"`
	Installed   []iosInstall `json:"installed"`
}

// iosLoadRuntimes loads the installed runtimes, laying out the preinstalled
// ones on first use and dropping images whose deletion has finished. Call
// it only inside withLock.
func iosLoadRuntimes() iosRuntimeState {
	var st iosRuntimeState
	load(iosRuntimeStateFile, &st)
	if !st.Initialized {
		st.Initialized = true
		for _, r := range iosRuntimeTable() {
			if r.preinstalled {
				st.Installed = append(st.Installed, iosInstall{Platform: r.platform, Version: r.version,
					Image: iosImageID(r.build), Broken: !r.available})
			}
		}
		save(iosRuntimeStateFile, st)
	}
	now := time.Now().UnixMilli()
	kept := st.Installed[:0]
	for _, in := range st.Installed {
		if in.DeletedAt == 0 || now < in.DeletedAt+iosDeleteLag.Milliseconds() {
			kept = append(kept, in)
		}
	}
	st.Installed = kept
	return st
}

// iosImageID is a fixed image identifier for a preinstalled runtime, so
// that runs of the shim agree on it.
func iosImageID(build string) string {
	sum := sha256.Sum256([]byte("shim-image-" + build))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%X-%X-%X-%X-%X", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// iosRuntimes is the installed runtimes simctl lists, in table order: a
// broken one is unavailable, and one being deleted stays listed until
// CoreSimulator is done with it.
func iosRuntimes() []iosRuntime {
	var st iosRuntimeState
	withLock(func() { st = iosLoadRuntimes() })
	var out []iosRuntime
	for _, r := range iosRuntimeTable() {
		for _, in := range st.Installed {
			if in.Platform == r.platform && in.Version == r.version {
				r.available = r.available && !in.Broken
				r.image = in.Image
				out = append(out, r)
			}
		}
	}
	return out
}

func (r iosRuntime) id() string {
	return "com.apple.CoreSimulator.SimRuntime." + r.platform + "-" + strings.ReplaceAll(r.version, ".", "-")
}

func (r iosRuntime) name() string { return r.platform + " " + r.version }

func iosVerString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v>>16, v>>8&0xff, v&0xff)
}

func (t iosDeviceType) json() map[string]any {
	return map[string]any{
		"productFamily":           t.family,
		"bundlePath":              "/Applications/Xcode.app/Contents/Developer/Platforms/iPhoneOS.platform/Library/Developer/CoreSimulator/Profiles/DeviceTypes/" + t.name + ".simdevicetype",
		"maxRuntimeVersion":       t.max,
		"maxRuntimeVersionString": iosVerString(t.max),
		"identifier":              t.id,
		"modelIdentifier":         t.model,
		"minRuntimeVersionString": iosVerString(t.min),
		"minRuntimeVersion":       t.min,
		"name":                    t.name,
	}
}

func (r iosRuntime) json(types []iosDeviceType) map[string]any {
	bundle := fmt.Sprintf("/Library/Developer/CoreSimulator/Volumes/%s_%s/Library/Developer/CoreSimulator/Profiles/Runtimes/%s.simruntime", r.platform, r.build, r.name())
	supported := []map[string]any{}
	for _, t := range types {
		if slices.Contains(r.supports, t.name) {
			supported = append(supported, map[string]any{
				"bundlePath":    t.json()["bundlePath"],
				"name":          t.name,
				"identifier":    t.id,
				"productFamily": t.family,
			})
		}
	}
	m := map[string]any{
		"bundlePath":           bundle,
		"buildversion":         r.build,
		"platform":             r.platform,
		"runtimeRoot":          bundle + "/Contents/Resources/RuntimeRoot",
		"identifier":           r.id(),
		"version":              r.version,
		"isInternal":           false,
		"isAvailable":          r.available,
		"name":                 r.name(),
		"supportedDeviceTypes": supported,
	}
	if !r.available {
		m["availabilityError"] = `runtime profile not found using "System" match policy`
	}
	return m
}

// iosXcrun runs `xcrun simctl …`; xcrun finds no other tool.
func iosXcrun(args []string) int {
	if len(args) == 0 || args[0] != "simctl" {
		fmt.Fprintf(os.Stderr, "xcrun: error: unable to find utility %q, not a developer tool or in PATH\n", strings.Join(args, " "))
		return 72
	}
	args = args[1:]
	set := ""
	switch {
	case len(args) >= 2 && args[0] == "--set":
		set, args = args[1], args[2:]
	case len(args) >= 1 && strings.HasPrefix(args[0], "--set="):
		set, args = strings.TrimPrefix(args[0], "--set="), args[1:]
	}
	if set != "" {
		abs, err := filepath.Abs(set)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		set = abs
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: simctl [--set <path>] [--profiles <path>] <subcommand> ...")
		return 64
	}
	sub, rest := args[0], args[1:]
	if code, msg, ok := failure("xcrun", sub); ok {
		fmt.Fprint(os.Stderr, msg)
		return code
	}
	switch sub {
	case "list":
		return iosList(set, rest)
	case "create":
		return iosCreate(set, rest)
	case "boot":
		return iosBoot(set, rest)
	case "bootstatus":
		return iosBootstatus(set, rest)
	case "shutdown":
		return iosShutdown(set, rest)
	case "erase":
		return iosErase(set, rest)
	case "delete":
		return iosDelete(set, rest)
	case "runtime":
		return iosRuntimeCmd(rest)
	case "spawn":
		return iosSpawn(set, rest)
	case "install":
		return iosInstallApp(set, rest)
	case "listapps":
		return iosListApps(set, rest)
	case "get_app_container":
		return iosGetAppContainer(set, rest)
	case "io":
		return iosIO(set, rest)
	case "launch":
		return iosLaunch(set, rest)
	case "terminate":
		return iosTerminate(set, rest)
	case "openurl":
		// A scheme no app of the stand-in claims: LaunchServices' error.
		if len(rest) == 2 && strings.HasPrefix(rest[1], "nohandler:") {
			fmt.Fprintf(os.Stderr, "An error was encountered processing the command (domain=NSOSStatusErrorDomain, code=-10814):\nSimulator device failed to open %s.\nThe operation couldn’t be completed. (OSStatus error -10814.)\n", rest[1])
			return 1
		}
	}
	if slices.Contains(iosDeviceVerbs, sub) {
		return iosOnDevice(set, sub, rest)
	}
	// Everything else stands for the many read-only or app-level
	// subcommands a passthrough may run: echo, so tests see what arrived.
	fmt.Println("simctl " + strings.Join(args, " "))
	return 0
}

// iosDeviceVerbs are the app-level subcommands whose first operand is a
// device, which iosOnDevice resolves as simctl does.
var iosDeviceVerbs = []string{"io", "openurl", "install", "uninstall", "launch", "terminate", "addmedia", "listapps",
	"get_app_container", "privacy", "keychain", "push", "ui", "status_bar", "location", "getenv", "appinfo", "pbcopy", "pbpaste"}

// iosOnDevice resolves the device operand (after the subcommand's options)
// of an app-level subcommand as simctl does: a UDID of the set, or booted,
// which is the first booted device of the set (whoever booted it); the
// device must be booted. It then echoes the command with the UDID it
// resolved, and `io DEV screenshot|recordVideo [--opt=…] FILE` writes FILE
// on the host, as simctl does.
func iosOnDevice(set, sub string, args []string) int {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		i++
	}
	if i == len(args) {
		fmt.Fprintf(os.Stderr, "Usage: simctl %s <device> ...\n", sub)
		return 64
	}
	devs := iosDevices(set)
	at := -1
	if args[i] == "booted" {
		at = slices.IndexFunc(devs, func(d iosDevice) bool { return d.State == "Booted" })
		if at < 0 {
			return iosFail(iosExitState, 405, "No devices are booted.")
		}
	} else if at = iosFind(devs, args[i]); at < 0 {
		return iosInvalidDevice(args[i])
	}
	if devs[at].State != "Booted" {
		return iosFail(iosExitState, 405, "Unable to lookup in current state: "+devs[at].State)
	}
	resolved := append(append(append([]string{sub}, args[:i]...), devs[at].UDID), args[i+1:]...)
	if sub == "pbcopy" {
		// pbcopy reads what to copy from stdin: echoed, so tests see it
		// arrived.
		b, _ := io.ReadAll(os.Stdin)
		fmt.Printf("pasteboard of %s: %s\n", devs[at].UDID, b)
		return 0
	}
	if ops := args[i+1:]; sub == "io" && len(ops) >= 2 && (ops[0] == "screenshot" || ops[0] == "recordVideo") {
		file := ops[len(ops)-1]
		if file != "-" {
			if err := os.WriteFile(file, []byte("PNG of "+devs[at].UDID+"\n"), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Printf("Wrote screenshot to: %s\n", file)
			return 0
		}
	}
	fmt.Println("simctl " + strings.Join(resolved, " "))
	return 0
}

// iosFail prints a CoreSimulator error the way simctl does.
func iosFail(exit, code int, msg string) int {
	fmt.Fprintf(os.Stderr, "An error was encountered processing the command (domain=com.apple.CoreSimulator.SimError, code=%d):\n%s\n", code, msg)
	return exit
}

func iosInvalidDevice(udid string) int {
	fmt.Fprintf(os.Stderr, "Invalid device: %s\n", udid)
	return iosExitInvalid
}

// iosUpdate runs f on the devices of set under the state lock and saves
// what f leaves.
func iosUpdate(set string, f func(devs []iosDevice) []iosDevice) {
	withLock(func() {
		var st iosState
		load(iosStateFile, &st)
		if st.Sets == nil {
			st.Sets = map[string][]iosDevice{}
		}
		st.Sets[set] = f(st.Sets[set])
		save(iosStateFile, st)
	})
}

func iosDevices(set string) []iosDevice {
	var st iosState
	withLock(func() { load(iosStateFile, &st) })
	return st.Sets[set]
}

func iosFind(devs []iosDevice, udid string) int {
	return slices.IndexFunc(devs, func(d iosDevice) bool { return strings.EqualFold(d.UDID, udid) })
}

func iosList(set string, args []string) int {
	asJSON := false
	var kinds []string
	for _, a := range args {
		switch a {
		case "-j", "--json":
			asJSON = true
		case "-v", "-e":
		default:
			kinds = append(kinds, a)
		}
	}
	if len(kinds) == 0 {
		kinds = []string{"devicetypes", "runtimes", "devices"}
	}
	types, runtimes := iosDeviceTypes(), iosRuntimes()
	devs := iosDevices(set)
	out := map[string]any{}
	for _, k := range kinds {
		switch k {
		case "devicetypes":
			list := []map[string]any{}
			for _, t := range types {
				list = append(list, t.json())
			}
			out["devicetypes"] = list
		case "runtimes":
			list := []map[string]any{}
			for _, r := range runtimes {
				list = append(list, r.json(types))
			}
			out["runtimes"] = list
		case "devices":
			byRuntime := map[string][]map[string]any{}
			for _, r := range runtimes {
				if r.available {
					byRuntime[r.id()] = []map[string]any{}
				}
			}
			for _, d := range devs {
				byRuntime[d.RuntimeID] = append(byRuntime[d.RuntimeID], iosDeviceJSON(set, d))
			}
			out["devices"] = byRuntime
		default:
			fmt.Fprintf(os.Stderr, "Unknown list type: %s\n", k)
			return 64
		}
	}
	if !asJSON {
		for _, d := range devs {
			fmt.Printf("    %s (%s) (%s)\n", d.Name, d.UDID, d.State)
		}
		return 0
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Println(string(b))
	return 0
}

func iosDeviceJSON(set string, d iosDevice) map[string]any {
	home := set
	if home == "" {
		home = "/Users/ci/Library/Developer/CoreSimulator/Devices"
	}
	m := map[string]any{
		"dataPath":             filepath.Join(home, d.UDID, "data"),
		"dataPathSize":         412090368,
		"logPath":              "/Users/ci/Library/Logs/CoreSimulator/" + d.UDID,
		"udid":                 d.UDID,
		"isAvailable":          true,
		"deviceTypeIdentifier": d.DeviceTypeID,
		"state":                d.State,
		"name":                 d.Name,
	}
	if d.LastBootedAt != "" {
		m["lastBootedAt"] = d.LastBootedAt
	}
	return m
}

func iosCreate(set string, args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "Usage: simctl create <name> <device type id> <runtime id>")
		return 64
	}
	name, typeArg, rtArg := args[0], args[1], args[2]
	ti := slices.IndexFunc(iosDeviceTypes(), func(t iosDeviceType) bool { return t.id == typeArg || t.name == typeArg })
	if ti < 0 {
		return iosFail(iosExitInvalid, 403, "Invalid device type: "+typeArg)
	}
	dt := iosDeviceTypes()[ti]
	runtimes := iosRuntimes()
	ri := slices.IndexFunc(runtimes, func(r iosRuntime) bool { return r.id() == rtArg || r.name() == rtArg })
	if ri < 0 || !runtimes[ri].available {
		return iosFail(iosExitInvalid, 403, "Invalid runtime: "+rtArg)
	}
	rt := runtimes[ri]
	if !slices.Contains(rt.supports, dt.name) {
		return iosFail(iosExitInvalid, 403, "Incompatible device")
	}
	udid := iosNewUDID()
	if set != "" {
		if err := os.MkdirAll(filepath.Join(set, udid, "data"), 0o700); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	iosUpdate(set, func(devs []iosDevice) []iosDevice {
		return append(devs, iosDevice{UDID: udid, Name: name, DeviceTypeID: dt.id, RuntimeID: rt.id(), State: "Shutdown"})
	})
	fmt.Println(udid)
	return 0
}

func iosNewUDID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%X-%X-%X-%X-%X", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func iosBoot(set string, args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "Usage: simctl boot <device>")
		return 64
	}
	udid := args[0]
	code := 0
	iosUpdate(set, func(devs []iosDevice) []iosDevice {
		i := iosFind(devs, udid)
		switch {
		case i < 0:
			code = iosInvalidDevice(udid)
		case devs[i].State == "Booted":
			code = iosFail(iosExitState, 405, "Unable to boot device in current state: Booted")
		default:
			devs[i].State = "Booted"
			devs[i].LastBootedAt = time.Now().UTC().Format(time.RFC3339)
		}
		return devs
	})
	return code
}

// iosBootstatus waits outside the lock, as a boot takes time during which
// other calls go on.
func iosBootstatus(set string, args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "Usage: simctl bootstatus <device> [-bcd]")
		return 64
	}
	udid := args[0]
	i := iosFind(iosDevices(set), udid)
	if i < 0 {
		return iosInvalidDevice(udid)
	}
	time.Sleep(iosBootstatusWait)
	devs := iosDevices(set)
	if i = iosFind(devs, udid); i < 0 {
		return iosInvalidDevice(udid)
	}
	if devs[i].State != "Booted" {
		return iosFail(iosExitState, 405, "Unable to monitor boot status in current state: "+devs[i].State)
	}
	fmt.Printf("Monitoring boot status for %s (%s).\nDevice already booted, nothing to do.\n", devs[i].Name, devs[i].UDID)
	return 0
}

func iosShutdown(set string, args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "Usage: simctl shutdown <device> | all")
		return 64
	}
	udid := args[0]
	code := 0
	iosUpdate(set, func(devs []iosDevice) []iosDevice {
		if udid == "all" {
			for i := range devs {
				devs[i].State = "Shutdown"
			}
			return devs
		}
		i := iosFind(devs, udid)
		switch {
		case i < 0:
			code = iosInvalidDevice(udid)
		case devs[i].State == "Shutdown":
			code = iosFail(iosExitState, 405, "Unable to shutdown device in current state: Shutdown")
		default:
			devs[i].State = "Shutdown"
		}
		return devs
	})
	return code
}

// iosTargets resolves UDID|all to the indexes of the devices meant.
func iosTargets(devs []iosDevice, arg string) ([]int, bool) {
	if arg == "all" {
		var all []int
		for i := range devs {
			all = append(all, i)
		}
		return all, true
	}
	i := iosFind(devs, arg)
	return []int{i}, i >= 0
}

func iosErase(set string, args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "Usage: simctl erase <device> | all")
		return 64
	}
	code := 0
	iosUpdate(set, func(devs []iosDevice) []iosDevice {
		idx, ok := iosTargets(devs, args[0])
		if !ok {
			code = iosInvalidDevice(args[0])
			return devs
		}
		for _, i := range idx {
			if devs[i].State != "Shutdown" {
				code = iosFail(iosExitState, 405, "Unable to erase contents and settings in current state: "+devs[i].State)
				return devs
			}
		}
		for _, i := range idx {
			if set != "" {
				data := filepath.Join(set, devs[i].UDID, "data")
				os.RemoveAll(data)
				os.MkdirAll(data, 0o700)
			}
		}
		return devs
	})
	return code
}

func iosDelete(set string, args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "Usage: simctl delete <device> | unavailable | all")
		return 64
	}
	if args[0] == "unavailable" {
		return 0 // every device the shim makes is available
	}
	code := 0
	iosUpdate(set, func(devs []iosDevice) []iosDevice {
		idx, ok := iosTargets(devs, args[0])
		if !ok {
			code = iosInvalidDevice(args[0])
			return devs
		}
		for _, i := range idx {
			if devs[i].State != "Shutdown" {
				code = iosFail(iosExitState, 405, "Unable to delete device in current state: "+devs[i].State)
				return devs
			}
		}
		var keep []iosDevice
		for i, d := range devs {
			if !slices.Contains(idx, i) {
				keep = append(keep, d)
			} else if set != "" {
				os.RemoveAll(filepath.Join(set, d.UDID))
			}
		}
		return keep
	})
	return code
}

func iosXcodebuild(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "xcodebuild: error: no action given")
		return 64
	}
	if code, msg, ok := failure("xcodebuild", strings.TrimLeft(args[0], "-")); ok {
		fmt.Fprint(os.Stderr, msg)
		return code
	}
	switch args[0] {
	case "-version":
		fmt.Print("Xcode 26.1\nBuild version 17B55\n")
	case "-license", "-checkFirstLaunchStatus", "-runFirstLaunch":
		// Accepted and done: a test injects a failure to say otherwise.
	case "-downloadPlatform":
		return iosDownloadPlatform(args[1:])
	default:
		fmt.Println("xcodebuild " + strings.Join(args, " "))
	}
	return 0
}

// iosPlatformIDs are the platform identifiers `runtime list` prints.
var iosPlatformIDs = map[string]string{
	"iOS":     "com.apple.platform.iphonesimulator",
	"tvOS":    "com.apple.platform.appletvsimulator",
	"watchOS": "com.apple.platform.watchsimulator",
}

// iosImageSize is a runtime disk image's size: iOS images are the big ones.
func iosImageSize(r iosRuntime) int64 {
	if r.platform == "iOS" {
		return 8_859_345_289
	}
	return 3_994_567_012
}

// iosRuntimeCmd is `simctl runtime list [-j]` and `simctl runtime delete
// <image identifier>`. Deletion goes on in the background: for
// iosDeleteLag the image stays listed as Deleting and its runtime in `list
// runtimes`.
func iosRuntimeCmd(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "Usage: simctl runtime <add|delete|list|match> ...")
		return 64
	}
	if code, msg, ok := failure("xcrun", "runtime-"+args[0]); ok {
		fmt.Fprint(os.Stderr, msg)
		return code
	}
	switch args[0] {
	case "list":
		var st iosRuntimeState
		withLock(func() { st = iosLoadRuntimes() })
		out := map[string]any{}
		for _, in := range st.Installed {
			i := slices.IndexFunc(iosRuntimeTable(), func(r iosRuntime) bool { return r.platform == in.Platform && r.version == in.Version })
			if i < 0 {
				continue
			}
			r := iosRuntimeTable()[i]
			state := "Ready"
			if in.DeletedAt != 0 {
				state = "Deleting"
			}
			out[in.Image] = map[string]any{
				"build":              r.build,
				"deletable":          true,
				"identifier":         in.Image,
				"kind":               "Disk Image",
				"lastUsedAt":         "2026-05-01T10:11:06Z",
				"mountPath":          "/Library/Developer/CoreSimulator/Volumes/" + r.platform + "_" + r.build,
				"path":               "/Library/Developer/CoreSimulator/Images/" + in.Image + ".dmg",
				"platformIdentifier": iosPlatformIDs[r.platform],
				"runtimeIdentifier":  r.id(),
				"signatureState":     "Verified",
				"sizeBytes":          iosImageSize(r),
				"state":              state,
				"version":            r.version,
			}
		}
		if !slices.Contains(args[1:], "-j") && !slices.Contains(args[1:], "--json") {
			for id, v := range out {
				m := v.(map[string]any)
				fmt.Printf("%s %s (%s) - %s (%s)\n", m["platformIdentifier"], m["version"], m["build"], id, m["state"])
			}
			return 0
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Println(string(b))
		return 0
	case "delete":
		if len(args) != 2 {
			fmt.Fprintln(os.Stderr, "Usage: simctl runtime delete <identifier>")
			return 64
		}
		found := false
		withLock(func() {
			st := iosLoadRuntimes()
			for i, in := range st.Installed {
				if strings.EqualFold(in.Image, args[1]) && in.DeletedAt == 0 {
					st.Installed[i].DeletedAt = time.Now().UnixMilli()
					found = true
				}
			}
			save(iosRuntimeStateFile, st)
		})
		if !found {
			fmt.Fprintf(os.Stderr, "No runtime disk image found matching '%s'.\n", args[1])
			return 1
		}
		return 0
	}
	fmt.Println("simctl runtime " + strings.Join(args, " "))
	return 0
}

// iosDownloadPlatform is `xcodebuild -downloadPlatform iOS [-buildVersion
// V]`: the newest iOS runtime of the table, or the one whose version or
// build is V. It prints xcodebuild's progress redraws on stderr, a step
// (setting DOWNLOAD_STEP) apart, then installs the runtime with a new disk
// image. A runtime the table lacks is not available for download. Failure
// key "downloadPlatform-hang" makes it print its first lines and then wait
// until it is killed.
func iosDownloadPlatform(args []string) int {
	platform, buildVersion := "", ""
	for i := 0; i < len(args); i++ {
		switch {
		case i == 0 && !strings.HasPrefix(args[i], "-"):
			platform = args[i]
		case args[i] == "-buildVersion" && i+1 < len(args):
			buildVersion = args[i+1]
			i++
		case args[i] == "-exportPath" && i+1 < len(args):
			i++
		}
	}
	if platform != "iOS" {
		fmt.Fprintf(os.Stderr, "xcodebuild: error: %q is not a platform this shim can download; pass iOS.\n", platform)
		return 64
	}
	var target *iosRuntime
	for _, r := range iosRuntimeTable() {
		if r.platform != "iOS" || !r.available {
			continue
		}
		switch {
		case buildVersion == "" && (target == nil || iosNewer(r.version, target.version)):
			target = &r
		case buildVersion != "" && (r.version == buildVersion || r.build == buildVersion):
			target = &r
		}
	}
	fmt.Fprint(os.Stderr, "Finding content...\n")
	if target == nil {
		fmt.Fprintf(os.Stderr, "xcodebuild: error: iOS %s is not available for download.\n", buildVersion)
		return 70
	}
	if slices.ContainsFunc(iosRuntimes(), func(r iosRuntime) bool {
		return r.platform == "iOS" && r.version == target.version && r.available
	}) {
		fmt.Fprintf(os.Stderr, "iOS %s Simulator (%s) is already installed.\n", target.version, target.build)
		return 0
	}
	_, _, hang := failure("xcodebuild", "downloadPlatform-hang")
	step := settingDuration("DOWNLOAD_STEP", 20*time.Millisecond)
	prefix := fmt.Sprintf("Downloading iOS %s Universal Simulator (%s): ", target.version, target.build)
	fmt.Fprint(os.Stderr, prefix+"\r")
	fmt.Fprint(os.Stderr, prefix+"Preparing to download...\r")
	if hang {
		fmt.Fprint(os.Stderr, prefix+"0,0% (73 kB of 8,86 GB)\r")
		waitForSignal()
		return 1
	}
	for _, p := range []struct{ pct, done string }{
		{"0,0", "73 kB"}, {"0,4", "39,4 MB"}, {"2,7", "235 MB"}, {"9,7", "857,8 MB"},
		{"38,5", "3,41 GB"}, {"71,2", "6,31 GB"}, {"100,0", "8,86 GB"},
	} {
		time.Sleep(step)
		fmt.Fprintf(os.Stderr, "%s%s%% (%s of 8,86 GB)\r", prefix, p.pct, p.done)
	}
	withLock(func() {
		st := iosLoadRuntimes()
		st.Installed = slices.DeleteFunc(st.Installed, func(in iosInstall) bool {
			return in.Platform == "iOS" && in.Version == target.version
		})
		st.Installed = append(st.Installed, iosInstall{Platform: "iOS", Version: target.version, Image: iosNewUDID()})
		save(iosRuntimeStateFile, st)
	})
	fmt.Fprintf(os.Stderr, "\nDone downloading: iOS %s Simulator (%s).\n", target.version, target.build)
	return 0
}

// iosNewer reports whether version a is newer than b.
func iosNewer(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			fmt.Sscanf(pa[i], "%d", &x)
		}
		if i < len(pb) {
			fmt.Sscanf(pb[i], "%d", &y)
		}
		if x != y {
			return x > y
		}
	}
	return false
}

// iosMissingLabels are services no shim runtime has: launchctl refuses to
// disable them, as a real runtime refuses a label it lacks.
var iosMissingLabels = []string{"com.apple.siriinferenced"}

// iosSpawn stands for `simctl spawn UDID /bin/sh -c SCRIPT` running the
// slim pass's script inside the simulator: the device must be booted, and
// the labels of the script's `for l in A B C; do launchctl disable …` loop
// are added to DIR/UDID/data/launchd-disabled.txt, which an erase empties
// as it does the real overrides. A missing label prints the script's
// failure line. Any other spawned program is echoed.
func iosSpawn(set string, args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "Usage: simctl spawn <device> <path to executable> [<argv 1> <argv 2> ... <argv n>]")
		return 64
	}
	udid := args[0]
	devs := iosDevices(set)
	i := iosFind(devs, udid)
	if i < 0 {
		return iosInvalidDevice(udid)
	}
	if devs[i].State != "Booted" {
		return iosFail(iosExitState, 405, "Unable to lookup in current state: "+devs[i].State)
	}
	prog := args[1:]
	if len(prog) >= 2 && prog[0] == "log" && prog[1] == "show" {
		return iosLogShow(devs[i].UDID, prog[2:])
	}
	if len(prog) != 3 || prog[0] != "/bin/sh" || prog[1] != "-c" {
		fmt.Println(strings.Join(prog, " "))
		return 0
	}
	script := prog[2]
	from, to := strings.Index(script, "for l in "), strings.Index(script, "; do launchctl disable")
	if from < 0 || to < from || set == "" {
		fmt.Println(script)
		return 0
	}
	var disabled []string
	for _, l := range strings.Fields(script[from+len("for l in ") : to]) {
		l = strings.Trim(l, "'")
		if slices.Contains(iosMissingLabels, l) {
			fmt.Println("simlock-slim-failed " + l)
			continue
		}
		disabled = append(disabled, l)
	}
	f, err := os.OpenFile(filepath.Join(set, devs[i].UDID, "data", "launchd-disabled.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	for _, l := range disabled {
		fmt.Fprintln(f, l)
	}
	return 0
}

package android

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/simlock/simlock/internal/driver"
)

// Passthrough turns `simlock adb <args>` (and device.exec's adb) into adb
// against simlock's private server, pinned to t's emulator: `-P <port> -s
// <serial> <command>`, with ANDROID_SERIAL set to the serial too. What it
// refuses is adbArgs'.
func (d *Driver) Passthrough(t driver.Target, args []string) (driver.Command, error) {
	out, serial, err := adbArgs(t, args)
	if err != nil {
		return driver.Command{}, err
	}
	env := append([]string(nil), d.adbEnv...)
	if serial != "" {
		// Later entries win: the serial, whatever the daemon's or the
		// caller's environment says.
		env = append(env, "ANDROID_SERIAL="+serial)
	}
	return driver.Command{
		Tool: "adb",
		Path: d.sdk.adb,
		Args: append([]string{"-P", strconv.Itoa(d.port)}, out...),
		Env:  env,
	}, nil
}

// adbVerb is what simlock knows of one adb command.
type adbVerb struct {
	// device: the command acts on a device, so it runs only for a lease,
	// pinned to its serial. The others (version, help, devices) act on
	// none.
	device bool
	// hostFiles: the command reads or writes a file of this machine
	// (push's source, pull's destination, an APK to install, a bugreport
	// written to the working directory): a local caller's only.
	hostFiles bool
	// hostPorts: the command listens on a port of this machine, which
	// only a caller on it can connect to: a local caller's only.
	hostPorts bool
	// check refuses what the command's own arguments would reach beyond
	// the device ("" passes).
	check func(args []string) string
	// rewrite, when set, is what the arguments become once check passed
	// them.
	rewrite func(args []string) []string
}

// adbVerbs is an allow-list, not a deny-list: adb gains commands with its
// releases (pair, mdns, attach came late), and a command that reaches the
// server, the host's network or another device must never pass because
// simlock has not heard of it. A command not here is refused.
var adbVerbs = map[string]adbVerb{
	"version": {},
	"help":    {},
	// devices lists the emulators of simlock's server, as simctl list
	// lists its set: a read of the server, acting on no device.
	"devices": {},

	"shell":                 {device: true},
	"exec-out":              {device: true},
	"exec-in":               {device: true},
	"logcat":                {device: true},
	"uninstall":             {device: true},
	"get-state":             {device: true},
	"get-serialno":          {device: true},
	"get-devpath":           {device: true},
	"jdwp":                  {device: true},
	"features":              {device: true},
	"abb":                   {device: true},
	"abb_exec":              {device: true},
	"root":                  {device: true},
	"unroot":                {device: true},
	"reboot":                {device: true, check: bareReboot},
	"forward":               {device: true, hostPorts: true, check: checkForward, rewrite: noRebind},
	"reverse":               {device: true, check: checkReverse},
	"emu":                   {device: true, check: checkEmu},
	"push":                  {device: true, hostFiles: true},
	"pull":                  {device: true, hostFiles: true},
	"sync":                  {device: true, hostFiles: true},
	"install":               {device: true, hostFiles: true},
	"install-multiple":      {device: true, hostFiles: true},
	"install-multi-package": {device: true, hostFiles: true},
	"sideload":              {device: true, hostFiles: true},
	"backup":                {device: true, hostFiles: true},
	"restore":               {device: true, hostFiles: true},
	"bugreport":             {device: true, hostFiles: true},
}

// adbRefused says why the adb commands simlock knows and refuses are
// refused; a command in neither table is unknown, and refused too.
var adbRefused = map[string]string{
	"connect":        "connect attaches a device over the network to simlock's server, which serves only simlock's emulators",
	"disconnect":     "disconnect detaches devices from simlock's server, other leases' included",
	"pair":           "pair joins a device to simlock's server over the network",
	"kill-server":    "kill-server would stop simlock's adb server, which every lease uses",
	"start-server":   "start-server is simlock's to run: its server is already up",
	"reconnect":      "reconnect resets the connections of simlock's server, other leases' included",
	"tcpip":          "tcpip moves the device's adb to the network, where simlock's server cannot pin it",
	"usb":            "usb changes the device's adb transport",
	"mdns":           "mdns looks for devices on the host's network",
	"attach":         "attach takes a USB device for simlock's server",
	"detach":         "detach releases a USB device of simlock's server",
	"keygen":         "keygen writes a key file on simlock's machine and acts on no device",
	"remount":        "remount makes the device's system partitions writable, which outlives the lease's clean",
	"disable-verity": "disable-verity changes how the device boots, which outlives the lease's clean",
	"enable-verity":  "enable-verity changes how the device boots, which outlives the lease's clean",
	"ppp":            "ppp runs a network link on simlock's machine",
	"track-devices":  "track-devices follows every device of simlock's server",
	"host-features":  "host-features asks simlock's server, not the device",
}

// waitFor matches adb's wait-for[-TRANSPORT]-STATE commands, which wait
// for the pinned device.
var waitFor = regexp.MustCompile(`^wait-for(-(usb|local|any))?-(device|recovery|rescue|sideload|bootloader|disconnect)$`)

// adbArgs is the one rule for an adb command line, a pure function of t
// and args: it returns the arguments to give adb after -P <port>, and the
// serial they are pinned to ("" for a command that acts on no device), or
// a *driver.PassthroughRefusedError.
//
// The device is always t's: a command that acts on a device runs with -s
// <t's serial>, and a device selector of the caller's (-s, --serial, -t,
// --transport-id, -d, -e, in any spelling) that names anything else, or
// any server selector (-H, -P, -L) or other global option, is refused; the
// lease's own -s is accepted and not repeated. Commands are an allow-list
// (adbVerbs); forward and reverse keep tcp: on the host side (adb reverse
// tcp:8081 tcp:8081 is how a bundler reaches the app), forward never
// moves or drops another lease's (checkForward, noRebind), emu only the
// console commands that act on the emulator alone (emuCommands). For a
// remote t, a command that names a file of this machine is refused with
// the routes that move files instead (driver.FileRoutes), and forward,
// whose port on this machine it could not reach, is refused.
func adbArgs(t driver.Target, args []string) (out []string, serial string, err error) {
	refuse := func(format string, a ...any) ([]string, string, error) {
		return nil, "", &driver.PassthroughRefusedError{Tool: "adb", Message: fmt.Sprintf(format, a...)}
	}
	serial = t.Device.Address
	if t.HasDevice() && serial == "" {
		return refuse("the leased emulator has no adb serial right now (it is starting again); try again in a moment")
	}
	if len(args) == 0 {
		return refuse("give adb a command, e.g. adb shell getprop ro.build.version.release")
	}
	// The global options, which adb reads before the command.
	i, meta := 0, ""
	for ; i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-"; i++ {
		a := args[i]
		chosen, isSerial := "", true
		switch {
		case a == "--version" || a == "--help":
			if meta == "" {
				meta = a
			}
			continue
		case a == "-s" || a == "--serial":
			if i+1 == len(args) {
				return refuse("%s needs a serial", a)
			}
			i++
			chosen = args[i]
		case strings.HasPrefix(a, "--serial="):
			chosen = strings.TrimPrefix(a, "--serial=")
		case strings.HasPrefix(a, "-s") && !strings.HasPrefix(a, "--"):
			chosen = a[2:]
		default:
			isSerial = false
		}
		if isSerial {
			switch {
			case !t.HasDevice():
				return refuse("-s %s names a device, and no lease names one for this command: lease a device first, then pass --lease <id> (a holder of one Android lease needs no -s)", clipArg(chosen))
			case chosen != serial:
				return refuse("-s %s is not this lease's emulator: its commands reach %s and nothing else", clipArg(chosen), serial)
			}
			continue // the lease's own serial: given below, once
		}
		return refuse("%s", globalRefusal(a))
	}
	if i == len(args) {
		if meta != "" {
			return []string{meta}, "", nil
		}
		return refuse("no adb command given after the options")
	}
	if meta != "" {
		return []string{meta}, "", nil // adb prints its version or help and runs nothing
	}
	verb, rest := args[i], args[i+1:]
	v, known := adbVerbs[verb]
	if !known && waitFor.MatchString(verb) {
		v, known = adbVerb{device: true}, true
	}
	if !known {
		if why, ok := adbRefused[verb]; ok {
			return refuse("%s", why)
		}
		return refuse("adb %s is not a command simlock runs; it runs %s", clipArg(verb), strings.Join(adbVerbNames(), ", "))
	}
	if v.hostFiles && t.Remote {
		return refuse("adb %s reads or writes a file on simlock's machine, which a remote caller may not name: %s", verb, driver.FileRoutes)
	}
	if v.hostPorts && t.Remote {
		return refuse("adb %s listens on a port of simlock's machine, which only a caller on that machine can connect to", verb)
	}
	if v.check != nil {
		if why := v.check(rest); why != "" {
			return refuse("%s", why)
		}
	}
	if v.rewrite != nil {
		rest = v.rewrite(rest)
	}
	if !v.device {
		return append([]string{verb}, rest...), "", nil
	}
	if !t.HasDevice() {
		return refuse("adb %s acts on a device, and no lease names one for this command: pass --lease <id> (a holder of one Android lease needs none)", verb)
	}
	return append([]string{"-s", serial, verb}, rest...), serial, nil
}

// globalRefusal says why adb global option a is refused.
func globalRefusal(a string) string {
	name := a
	if !strings.HasPrefix(a, "--") && len(a) > 2 {
		name = a[:2] // -t3, -P5037, -Ltcp:…
	}
	name, _, _ = strings.Cut(name, "=")
	switch name {
	case "-t", "--transport-id":
		return a + " picks a device by transport id, which may be another lease's: the lease's emulator is chosen for you"
	case "-d", "-e":
		return a + " picks a device by kind, which may be another lease's: the lease's emulator is chosen for you"
	case "-H", "-P", "-L", "--server-port", "--server-host", "--server-socket":
		return "adb option " + a + " points adb at another server: simlock's adb talks only to simlock's own"
	case "-a", "--one-device", "--exit-on-write-error", "--reply-fd":
		return "adb option " + a + " changes how simlock's server runs"
	}
	return "adb option " + a + " is not one simlock passes: the lease's emulator is chosen for you, and only --version and --help may come before the command"
}

// bareReboot allows reboot of the device as it is, and refuses the
// targets (bootloader, recovery, sideload) an emulator has no use for.
func bareReboot(args []string) string {
	if len(args) > 0 {
		return "adb reboot " + clipArg(args[0]) + " is refused: an emulator reboots plainly (adb reboot)"
	}
	return ""
}

// tcpSpec matches the one host-side socket forward and reverse may use: a
// TCP port on the host's loopback.
var tcpSpec = regexp.MustCompile(`^tcp:[0-9]{1,5}$`)

// deviceSpecs are the socket kinds a forward or reverse may name on the
// device's side.
var deviceSpecs = []string{"tcp:", "localabstract:", "localreserved:", "localfilesystem:", "dev:", "jdwp:", "vsock:"}

func hostSpec(verb, spec string) string {
	if tcpSpec.MatchString(spec) {
		return ""
	}
	return fmt.Sprintf("adb %s %s is refused: on simlock's machine only a TCP port (tcp:<port>) may be used, not a socket, a file or a device node", verb, clipArg(spec))
}

func deviceSpec(verb, spec string) string {
	if slices.ContainsFunc(deviceSpecs, func(p string) bool { return strings.HasPrefix(spec, p) && len(spec) > len(p) }) {
		return ""
	}
	return fmt.Sprintf("adb %s: %s is not a socket on the device (tcp:, localabstract:, localreserved:, localfilesystem:, dev:, jdwp:, vsock:)", verb, clipArg(spec))
}

// checkForward allows forward [--no-rebind] tcp:<port> <device socket>,
// --remove tcp:<port> and --list: the first socket is the host's. The
// host's forwards are one table of simlock's server, whatever -s says:
// --remove-all would drop every lease's, so it is refused, and a forward
// is never rebound (noRebind).
func checkForward(args []string) string {
	if len(args) > 0 && args[0] == "--remove-all" {
		return "adb forward --remove-all is refused: simlock's server keeps one table of forwards for every lease's emulator, and it would remove them all; remove yours with adb forward --remove tcp:<port>"
	}
	return checkSockets("forward", args, true)
}

// noRebind makes a forward fail on a port already forwarded rather than
// take it: adb would otherwise move the port, whichever emulator it
// forwarded to (another lease's included), to this one. Removing and
// listing are left as they are.
func noRebind(args []string) []string {
	if len(args) == 0 || args[0] == "--no-rebind" || args[0] == "--list" || args[0] == "--remove" || args[0] == "--remove-all" {
		return args
	}
	return append([]string{"--no-rebind"}, args...)
}

// checkReverse allows reverse [--no-rebind] <device socket> tcp:<port>,
// --remove <device socket>, --remove-all and --list: the second socket is
// the host's.
func checkReverse(args []string) string {
	return checkSockets("reverse", args, false)
}

func checkSockets(verb string, args []string, hostFirst bool) string {
	usage := fmt.Sprintf("adb %s takes --list, --remove-all, --remove <socket>, or [--no-rebind] <local> <remote>", verb)
	switch {
	case len(args) == 1 && (args[0] == "--list" || args[0] == "--remove-all"):
		return ""
	case len(args) == 2 && args[0] == "--remove":
		if hostFirst {
			return hostSpec(verb, args[1])
		}
		return deviceSpec(verb, args[1])
	}
	if len(args) > 0 && args[0] == "--no-rebind" {
		args = args[1:]
	}
	if len(args) != 2 {
		return usage
	}
	host, dev := args[0], args[1]
	if !hostFirst {
		host, dev = dev, host
	}
	if why := hostSpec(verb, host); why != "" {
		return why
	}
	return deviceSpec(verb, dev)
}

// emuCommands are the emulator console commands adb emu may send: the ones
// that act on the emulator alone (its sensors, radio, battery, location,
// input). The console's others reach the host (screenrecord and network
// capture write files on it, redir and proxy open its network, qemu and
// automation drive the emulator process) or simlock's own state (kill,
// avd stop, and every avd snapshot verb, which could overwrite or delete
// simlock_clean_baseline, the snapshot the next lease starts from).
var emuCommands = []string{"geo", "sms", "gsm", "cdma", "power", "network", "event", "rotate", "finger", "sensor", "fold", "unfold", "posture", "ping", "help", "help-verbose", "avd"}

// checkEmu refuses what adb emu may not send. adb joins the words after
// emu into one console line, so the words are judged as the console reads
// them, however they are split into arguments; a line break would start a
// second command, so none may be given.
func checkEmu(args []string) string {
	for _, a := range args {
		if strings.ContainsFunc(a, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return "adb emu: a console command is one line; control characters are refused"
		}
	}
	words := strings.Fields(strings.ToLower(strings.Join(args, " ")))
	if len(words) == 0 {
		return "adb emu needs a console command, e.g. adb emu geo fix -122.08 37.42"
	}
	w0 := words[0]
	w1 := ""
	if len(words) > 1 {
		w1 = words[1]
	}
	switch {
	case w0 == "avd" && w1 == "snapshot":
		return "adb emu avd snapshot is refused: the emulator's snapshots are simlock's, and simlock_clean_baseline is what the next lease starts from"
	case w0 == "kill" || (w0 == "avd" && (w1 == "stop" || w1 == "start" || w1 == "pause" || w1 == "resume")):
		return "adb emu " + strings.Join(words[:min(2, len(words))], " ") + " is simlock's to run: release the lease instead"
	case w0 == "avd" && (w1 == "name" || w1 == "status"):
		return ""
	case w0 == "avd":
		return "adb emu avd " + clipArg(w1) + " is refused: of the avd commands, only avd name and avd status act on the emulator alone"
	case w0 == "network" && w1 == "capture":
		return "adb emu network capture writes a file on simlock's machine"
	case w0 == "screenrecord":
		return "adb emu screenrecord writes files on simlock's machine"
	case w0 == "redir" || w0 == "proxy":
		return "adb emu " + w0 + " reaches the network of simlock's machine"
	case slices.Contains(emuCommands, w0):
		return ""
	}
	return "adb emu " + clipArg(w0) + " is not a console command simlock passes; it passes " + strings.Join(emuCommands, ", ") + " (avd name and avd status only)"
}

// adbVerbNames lists the commands adbArgs allows, sorted.
func adbVerbNames() []string {
	names := make([]string, 0, len(adbVerbs)+1)
	for n := range adbVerbs {
		names = append(names, n)
	}
	names = append(names, "wait-for-…")
	slices.Sort(names)
	return names
}

// clipArg bounds an argument quoted back in a refusal.
func clipArg(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

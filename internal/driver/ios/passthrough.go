package ios

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/simlock/simlock/internal/driver"
)

// Passthrough turns `simlock simctl <args>` (and device.exec's simctl) into
// `xcrun simctl --set <root> <args>`, so the caller reaches the simulators
// simlock leases and no others, pinned to t's simulator. What it refuses
// and rewrites is simctlArgs'.
func (d *Driver) Passthrough(t driver.Target, args []string) (driver.Command, error) {
	out, err := simctlArgs(t, args)
	if err != nil {
		return driver.Command{}, err
	}
	return driver.Command{
		Tool: "simctl",
		Path: d.xcrun,
		Args: append([]string{"simctl", "--set", d.root}, out...),
		Env:  slices.Clone(d.env),
	}, nil
}

// simctlVerb is what simlock knows of one simctl subcommand.
type simctlVerb struct {
	// device: the subcommand's first operand is a device, which must be
	// the lease's simulator.
	device bool
	// hostFiles: the operands after the device name files of this machine
	// (an app to install, media to add): a local caller's only.
	hostFiles bool
	// options are the options the subcommand takes before its device
	// (launch's); any other option there is refused.
	options func(opt string, remote bool) string
	// check refuses what the operands after the device would reach beyond
	// the simulator, for a local or a remote caller ("" passes).
	check func(operands []string, remote bool) string
}

// simctlVerbs is an allow-list: simctl gains subcommands with Xcode's
// releases, and one that reaches the host or every simulator must never
// pass because simlock has not heard of it. A subcommand not here is
// refused.
var simctlVerbs = map[string]simctlVerb{
	"list": {},
	"help": {},

	"boot":              {device: true},
	"bootstatus":        {device: true},
	"shutdown":          {device: true},
	"openurl":           {device: true, check: checkOpenURL},
	"uninstall":         {device: true},
	"terminate":         {device: true},
	"get_app_container": {device: true},
	"getenv":            {device: true},
	"listapps":          {device: true},
	"appinfo":           {device: true},
	"logverbose":        {device: true},
	"icloud_sync":       {device: true},
	"pbcopy":            {device: true},
	"pbpaste":           {device: true},
	"privacy":           {device: true},
	"ui":                {device: true},
	"status_bar":        {device: true},
	"location":          {device: true},
	"install":           {device: true, hostFiles: true},
	"install_app_data":  {device: true, hostFiles: true},
	"addmedia":          {device: true, hostFiles: true},
	"launch":            {device: true, options: launchOption},
	"io":                {device: true, check: checkIO},
	"keychain":          {device: true, check: checkKeychain},
	"push":              {device: true, check: checkPush},
}

// simctlRefused says why the subcommands simlock knows and refuses are
// refused; one in neither table is unknown, and refused too.
var simctlRefused = map[string]string{
	"create":        "create is refused: simlock creates the simulators in its set; lease one with `simlock lease --platform ios`",
	"clone":         "clone is refused: simlock creates the simulators in its set",
	"erase":         "erase is refused: simlock erases a simulator when its lease ends, and `erase all` would wipe every leased simulator",
	"delete":        "delete is refused: simlock deletes its simulators itself; release the lease instead",
	"rename":        "rename is refused: simlock names its simulators",
	"upgrade":       "upgrade is refused: a simulator's runtime is simlock's to choose",
	"repair":        "repair is refused: simlock cleans its simulators itself",
	"runtime":       "runtime is refused: a runtime serves every simulator on this Mac, not only the lease's",
	"spawn":         "spawn is refused: it runs a process on simlock's Mac",
	"pair":          "pair is refused: it ties two simulators together, and only one is the lease's",
	"unpair":        "unpair is refused: it acts on a pair of simulators",
	"pair_activate": "pair_activate is refused: it acts on a pair of simulators",
	"pbsync":        "pbsync is refused: it reaches a second device's pasteboard",
	"diagnose":      "diagnose is refused: it collects logs of the whole Mac into files on it",
	"darwinup":      "darwinup is refused: it changes a runtime, which serves every simulator",
}

// simctlArgs is the one rule for a simctl command line, a pure function of
// t and args: it returns the arguments to give `simctl --set <root>`, or a
// *driver.PassthroughRefusedError.
//
// Subcommands are an allow-list (simctlVerbs). The device operand of every
// device subcommand must be t's UDID; `booted`, which simctl reads as
// whichever simulator it finds booted (another lease's, as likely as
// this one's), is rewritten to t's UDID; any other UDID or name is
// refused, as is `shutdown all`. Options before the subcommand are
// simlock's (--set is set for you). For a remote t, an operand that names
// a file of this machine (an app, media, a screenshot or video, a
// certificate, a push payload, launch's --stdout and --stderr, a file: or
// scheme-less URL to open) is refused
// with the routes that move files instead (driver.FileRoutes); `-` (the
// command's own stdin or stdout) is not a file; any -o or --output,
// wherever it stands, is taken for one.
func simctlArgs(t driver.Target, args []string) ([]string, error) {
	refuse := func(format string, a ...any) ([]string, error) {
		return nil, &driver.PassthroughRefusedError{Tool: "simctl", Message: fmt.Sprintf(format, a...)}
	}
	if len(args) == 0 {
		return refuse("no subcommand given; try `simlock simctl list devices`")
	}
	if first := args[0]; strings.HasPrefix(first, "-") {
		// Any option before the subcommand is refused, not only --set and
		// --profiles: simctl reads its global options there, and an
		// allow-list cannot miss a spelling (-set, --set=x, --profiles …).
		name, _, _ := strings.Cut(strings.ToLower(strings.TrimLeft(first, "-")), "=")
		if name == "set" || name == "profiles" {
			return refuse("%s is refused: simlock scopes simctl to its own device set, and another set would reach simulators that are not simlock's", clipArg(first))
		}
		return refuse("%s is refused: simctl options before the subcommand are simlock's to set", clipArg(first))
	}
	sub := args[0]
	v, known := simctlVerbs[sub]
	if !known {
		if why, ok := simctlRefused[strings.ToLower(sub)]; ok {
			return refuse("%s", why)
		}
		return refuse("%s is not a simctl subcommand simlock runs; it runs %s", clipArg(sub), strings.Join(simctlVerbNames(), ", "))
	}
	if !v.device {
		return slices.Clone(args), nil
	}
	rest := args[1:]
	// The subcommand's options before its device.
	i := 0
	for ; i < len(rest) && strings.HasPrefix(rest[i], "-") && rest[i] != "-"; i++ {
		if v.options == nil {
			return refuse("simctl %s takes no option before its device; %s is refused", sub, clipArg(rest[i]))
		}
		if why := v.options(rest[i], t.Remote); why != "" {
			return refuse("%s", why)
		}
	}
	if i == len(rest) {
		return refuse("simctl %s needs a device: the lease's UDID, or booted", sub)
	}
	dev, operands := rest[i], rest[i+1:]
	switch {
	case sub == "shutdown" && strings.EqualFold(dev, "all"):
		return refuse("shutdown all is refused: it would stop every simulator in simlock's set, other agents' leases included; shut down yours by UDID")
	case !t.HasDevice():
		return refuse("simctl %s acts on a simulator, and no lease names one for this command: pass --lease <id> (a holder of one iOS lease needs none)", sub)
	case strings.EqualFold(dev, "booted"), strings.EqualFold(dev, t.Device.ID):
		dev = t.Device.ID
	default:
		return refuse("simctl %s %s: the device must be this lease's simulator %s (or booted, which simlock reads as it); it reaches nothing else", sub, clipArg(dev), t.Device.ID)
	}
	if v.hostFiles && t.Remote {
		return refuse("simctl %s reads files on simlock's machine, which a remote caller may not name: %s", sub, driver.FileRoutes)
	}
	if t.Remote {
		// An output option names a file of this machine, whichever
		// subcommand takes it.
		for _, a := range rest {
			if name, _, _ := strings.Cut(a, "="); name == "-o" || name == "--output" {
				return refuse("simctl %s %s", sub, hostFileRefusal(clipArg(a)))
			}
		}
	}
	if v.check != nil {
		if why := v.check(operands, t.Remote); why != "" {
			return refuse("simctl %s: %s", sub, why)
		}
	}
	out := make([]string, 0, len(args))
	out = append(out, sub)
	out = append(out, rest[:i]...)
	out = append(out, dev)
	return append(out, operands...), nil
}

// hostFileRefusal is the refusal of an operand that names a file of this
// machine, for a remote caller.
func hostFileRefusal(what string) string {
	return what + " names a file on simlock's machine, which a remote caller may not: " + driver.FileRoutes
}

// launchOption allows launch's options before the device: waiting for a
// debugger and replacing a running process; --stdout and --stderr write a
// file of this machine (a local caller's only); --console and
// --console-pty tie the app to the daemon's own terminal.
func launchOption(opt string, remote bool) string {
	name, _, _ := strings.Cut(opt, "=")
	switch name {
	case "-w", "--wait-for-debugger", "--terminate-running-process":
		return ""
	case "--stdout", "--stderr":
		if remote {
			return "simctl launch " + hostFileRefusal(name)
		}
		if !strings.Contains(opt, "=") {
			return "simctl launch " + name + " takes its file as " + name + "=<path>"
		}
		return ""
	case "--console", "--console-pty":
		return "simctl launch " + name + " is refused: it ties the app's output to a terminal of simlock's machine; use --stdout=<path> and --stderr=<path> locally"
	}
	return "simctl launch option " + clipArg(opt) + " is not one simlock passes"
}

// ioOptions are the options of io screenshot and recordVideo a remote
// caller may give, each as --name=value; --force takes none.
var ioOptions = []string{"--type", "--display", "--mask", "--codec"}

// checkIO allows io's operations on the device; screenshot and
// recordVideo write a file of this machine unless their file is - (stdout).
// A remote caller's other operands must be options simlock knows, so that
// nothing simctl might read as the file passes as an option.
func checkIO(operands []string, remote bool) string {
	if len(operands) == 0 {
		return "io needs an operation: enumerate, poll, screenshot or recordVideo"
	}
	switch op := operands[0]; op {
	case "enumerate", "poll":
		return ""
	case "screenshot", "recordVideo":
		if !remote {
			return ""
		}
		for _, a := range operands[1:] {
			if a != "-" && !strings.HasPrefix(a, "-") {
				return "io " + op + " " + hostFileRefusal(clipArg(a)) + " (give options as --name=value)"
			}
		}
		for _, a := range operands[1:] {
			if name, _, hasValue := strings.Cut(a, "="); a != "-" && a != "--force" && (!hasValue || !slices.Contains(ioOptions, name)) {
				return "io " + op + " option " + clipArg(a) + " is not one simlock passes to a remote caller: " +
					strings.Join(ioOptions, "=…, ") + "=…, --force, and - (stdout) as the file"
			}
		}
		return ""
	default:
		return "io " + clipArg(op) + " is not an operation simlock passes (enumerate, poll, screenshot, recordVideo)"
	}
}

// urlScheme matches the scheme a URL starts with (RFC 3986).
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// checkOpenURL refuses to a remote caller a file: URL, which opens a file
// of this machine in the simulator, and anything with no scheme at all,
// which could be read as a path of this machine.
func checkOpenURL(operands []string, remote bool) string {
	if !remote || len(operands) == 0 {
		return ""
	}
	u := strings.TrimSpace(operands[0])
	switch {
	case strings.HasPrefix(strings.ToLower(u), "file:"):
		return "openurl " + hostFileRefusal("a file: URL")
	case !urlScheme.MatchString(u):
		return "openurl " + clipArg(u) + " has no scheme (https:, a custom scheme of the app): a remote caller's URL needs one, as a bare path would name a file of simlock's machine"
	}
	return ""
}

// checkKeychain allows reset; add-root-cert and add-cert read a
// certificate file of this machine.
func checkKeychain(operands []string, remote bool) string {
	if len(operands) == 0 {
		return "keychain needs an action: add-root-cert, add-cert or reset"
	}
	switch op := operands[0]; op {
	case "reset":
		return ""
	case "add-root-cert", "add-cert":
		if remote {
			return "keychain " + op + " " + hostFileRefusal("its certificate")
		}
		return ""
	default:
		return "keychain " + clipArg(op) + " is not an action simlock passes (add-root-cert, add-cert, reset)"
	}
}

// checkPush allows a payload on stdin (-); a payload file is a file of
// this machine.
func checkPush(operands []string, remote bool) string {
	if remote && (len(operands) == 0 || operands[len(operands)-1] != "-") {
		return "push " + hostFileRefusal("its JSON payload file") + "; give the payload on stdin with - as the file"
	}
	return ""
}

// simctlVerbNames lists the subcommands simctlArgs allows, sorted.
func simctlVerbNames() []string {
	names := make([]string, 0, len(simctlVerbs))
	for n := range simctlVerbs {
		names = append(names, n)
	}
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

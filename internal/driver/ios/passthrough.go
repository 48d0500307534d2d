package ios

import (
	"fmt"
	"slices"
	"strings"

	"github.com/simlock/simlock/internal/driver"
)

// Passthrough turns `simlock simctl <args>` into `xcrun simctl --set <root>
// <args>`, so the caller reaches the simulators simlock leases and no
// others. It refuses what would reach outside the set or take devices from
// under simlock (see refusal); everything else, booting, installing,
// launching, screenshots, passes unchanged.
func (d *Driver) Passthrough(args []string) (driver.Command, error) {
	if reason := refusal(args); reason != "" {
		return driver.Command{}, &driver.PassthroughRefusedError{Tool: "simctl", Message: reason}
	}
	return driver.Command{
		Tool: "simctl",
		Path: d.xcrun,
		Args: append([]string{"simctl", "--set", d.root}, args...),
		Env:  slices.Clone(d.env),
	}, nil
}

// refusal says why args may not be passed through, or "" when they may.
func refusal(args []string) string {
	if len(args) == 0 {
		return "no subcommand given; try `simlock simctl list devices`"
	}
	if first := args[0]; strings.HasPrefix(first, "-") {
		// Any option before the subcommand is refused, not only --set and
		// --profiles: simctl reads its global options there, and an
		// allow-list cannot miss a spelling (-set, --set=x, --profiles …).
		name, _, _ := strings.Cut(strings.ToLower(strings.TrimLeft(first, "-")), "=")
		if name == "set" || name == "profiles" {
			return fmt.Sprintf("%s is refused: simlock scopes simctl to its own device set, and another set would reach simulators that are not simlock's", first)
		}
		return fmt.Sprintf("%s is refused: simctl options before the subcommand are simlock's to set", first)
	}
	sub := strings.ToLower(args[0])
	rest := make([]string, 0, len(args)-1)
	for _, a := range args[1:] {
		rest = append(rest, strings.ToLower(a))
	}
	switch sub {
	case "create":
		return "create is refused: simlock creates the simulators in its set; lease one with `simlock lease --platform ios`"
	case "erase":
		return "erase is refused: simlock erases a simulator when its lease ends, and `erase all` would wipe every leased simulator"
	case "delete":
		return "delete is refused: simlock deletes its simulators itself; release the lease instead"
	case "shutdown":
		if slices.Contains(rest, "all") {
			return "shutdown all is refused: it would stop every simulator in simlock's set, other agents' leases included; shut down yours by UDID"
		}
	case "runtime":
		if i := slices.IndexFunc(rest, func(a string) bool { return !strings.HasPrefix(a, "-") }); i >= 0 && rest[i] == "delete" {
			return "runtime delete is refused: a runtime serves every simulator on this Mac, not only simlock's"
		}
	}
	return ""
}

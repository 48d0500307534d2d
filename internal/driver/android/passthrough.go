package android

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/simlock/simlock/internal/driver"
)

// Passthrough turns `simlock adb <args>` into adb against the private server:
// -P <port> goes first. It refuses what would reach past a lease: stopping
// the server (kill-server), stopping an emulator (emu kill, emu avd stop),
// deleting the clean snapshot (emu avd snapshot delete), and any global
// option other than -s, -t, -d, -e, --version and --help, since the others
// point adb at another server or change how it talks to it.
func (d *Driver) Passthrough(args []string) (driver.Command, error) {
	refuse := func(format string, a ...any) (driver.Command, error) {
		return driver.Command{}, &driver.PassthroughRefusedError{Tool: "adb", Message: fmt.Sprintf(format, a...)}
	}
	if len(args) == 0 {
		return refuse("give adb a command, e.g. simlock adb -s emulator-5586 shell ls")
	}
	// adb joins the words after `emu` into one console command, so a
	// sequence split differently across arguments is the same command.
	words := strings.Fields(strings.ToLower(strings.Join(args, " ")))
	for i, w := range words {
		if w == "kill-server" {
			return refuse("kill-server would stop simlock's adb server, which every lease uses")
		}
		if w != "emu" {
			continue
		}
		rest := words[i+1:]
		for _, bad := range [][]string{{"kill"}, {"avd", "stop"}, {"avd", "snapshot", "delete"}} {
			if len(rest) >= len(bad) && slices.Equal(rest[:len(bad)], bad) {
				return refuse("emu %s is simlock's to run: release the lease instead", strings.Join(bad, " "))
			}
		}
	}
	i, helpOrVersion := 0, false
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		switch a := args[i]; {
		case a == "-d" || a == "-e":
			i++
		case a == "-s" || a == "-t":
			if i+1 == len(args) {
				return refuse("%s needs a value", a)
			}
			i += 2
		case strings.HasPrefix(a, "-s") || strings.HasPrefix(a, "-t"):
			i++ // -s<serial>, -t<transport id>
		case a == "--version" || a == "--help":
			helpOrVersion = true
			i++
		default:
			return refuse("adb option %s is not allowed: simlock's adb talks only to simlock's own server; pick a device with -s", a)
		}
	}
	if i == len(args) && !helpOrVersion {
		return refuse("no adb command given after the options")
	}
	return driver.Command{
		Tool: "adb",
		Path: d.sdk.adb,
		Args: append([]string{"-P", strconv.Itoa(d.port)}, args...),
		Env:  append([]string(nil), d.adbEnv...),
	}, nil
}

package service

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
)

// systemdUnit is the unit name of the default home's user service.
const systemdUnit = "simlock"

// restartSeconds is how long systemd waits before it starts a daemon that
// failed again.
const restartSeconds = 5

// SystemUnitDir is where system units go.
const SystemUnitDir = "/etc/systemd/system"

func systemdPlan(spec Spec) Plan {
	name := systemdUnit
	if s := suffix(spec); s != "" {
		name += "-" + s
	}
	name += ".service"
	p := Plan{Manager: Systemd, Scope: ScopeUser, Name: name, Target: name, systemctl: []string{"systemctl", "--user"}}
	p.Path = filepath.Join(spec.UserHome, ".config", "systemd", "user", name)
	if spec.System {
		p.Scope, p.systemctl = ScopeSystem, []string{"systemctl"}
		p.Path = filepath.Join(SystemUnitDir, name)
	}
	p.File = Unit(spec)
	return p
}

// Unit renders the systemd unit of spec: a user unit, or with spec.System
// a system unit that runs the daemon as spec.User. Every value that comes
// from outside (paths, environment) is quoted for the directive it is in,
// so a home with spaces, quotes, backslashes, '%' or '$' reaches the daemon
// as it is.
func Unit(spec Spec) []byte {
	var b bytes.Buffer
	b.WriteString("[Unit]\n")
	fmt.Fprintf(&b, "Description=simlock daemon (SIMLOCK_HOME %s)\n", unitSpecifiers(spec.Home))
	if spec.System {
		// A worker's uplink and a gateway's listener want the network;
		// a user manager has no such target.
		b.WriteString("Wants=network-online.target\nAfter=network-online.target\n")
	}
	b.WriteString("\n[Service]\nType=simple\n")
	if spec.System {
		fmt.Fprintf(&b, "User=%s\n", spec.User)
	}
	line := []string{unitExecArg(spec.Binary)}
	for _, a := range args(spec) {
		line = append(line, unitExecArg(a))
	}
	fmt.Fprintf(&b, "ExecStart=%s\n", strings.Join(line, " "))
	for _, e := range environment(spec) {
		fmt.Fprintf(&b, "Environment=%s\n", unitEnvironment(e))
	}
	fmt.Fprintf(&b, "Restart=on-failure\nRestartSec=%d\n", restartSeconds)
	fmt.Fprintf(&b, "TimeoutStopSec=%d\n", stopGraceSeconds)
	// Only the daemon is told to stop: the emulators and the adb server it
	// started outlive it, as they do after `simlock daemon stop`, and the
	// next daemon adopts them.
	b.WriteString("KillMode=process\n")
	b.WriteString("\n[Install]\n")
	if spec.System {
		b.WriteString("WantedBy=multi-user.target\n")
	} else {
		b.WriteString("WantedBy=default.target\n")
	}
	return b.Bytes()
}

// unitSpecifiers escapes systemd's specifiers ("%h", "%u", ...): a '%'
// stands for itself as "%%".
func unitSpecifiers(s string) string { return strings.ReplaceAll(s, "%", "%%") }

// unitQuoted is s in double quotes, with the two characters a quoted
// word escapes (backslash and the double quote) escaped, and specifiers
// escaped.
func unitQuoted(s string) string {
	s = strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
	return `"` + unitSpecifiers(s) + `"`
}

// unitExecArg is one word of an ExecStart= command line, which expands
// $NAME and ${NAME} too: a '$' stands for itself as "$$".
func unitExecArg(s string) string {
	return strings.ReplaceAll(unitQuoted(s), "$", "$$")
}

// unitEnvironment is one assignment of Environment=, which expands no
// variables: NAME=value, quoted whole.
func unitEnvironment(e EnvVar) string { return unitQuoted(e.Name + "=" + e.Value) }

package service

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"path/filepath"
)

// launchdLabel is the label of the default home's agent.
const launchdLabel = "dev.simlock.daemon"

// stopGraceSeconds is how long the manager lets the daemon stop after
// SIGTERM before it kills it: a graceful stop gives device work in flight
// up to 30 s (see `simlock daemon stop`), then closes the drivers.
const stopGraceSeconds = 60

// The files under the home that a LaunchAgent's stdout and stderr go to
// (the daemon's own log is daemon.log).
const (
	LaunchdStdout = "service.out"
	LaunchdStderr = "service.err"
)

func launchdPlan(spec Spec) Plan {
	label := launchdLabel
	if s := suffix(spec); s != "" {
		label += "." + s
	}
	p := Plan{
		Manager: Launchd,
		Scope:   ScopeGUI,
		Name:    label,
		Path:    filepath.Join(spec.UserHome, "Library", "LaunchAgents", label+".plist"),
		uid:     spec.UID,
	}
	p.Target = fmt.Sprintf("%s/%s", p.domain(), label)
	p.File = Plist(spec, label)
	return p
}

// Plist renders the LaunchAgent of spec under label. It is a LaunchAgent,
// loaded into the user's GUI session (gui/<uid>), not a LaunchDaemon:
// simulators boot only in a session with a window server. launchd restarts
// the daemon when it exits unsuccessfully (a crash, a kill), not after a
// clean stop, as systemd's Restart=on-failure does.
func Plist(spec Spec, label string) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
`)
	str := func(indent, s string) { fmt.Fprintf(&b, "%s<string>%s</string>\n", indent, xmlText(s)) }
	key := func(indent, k string) { fmt.Fprintf(&b, "%s<key>%s</key>\n", indent, xmlText(k)) }

	key("\t", "Label")
	str("\t", label)
	key("\t", "ProgramArguments")
	b.WriteString("\t<array>\n")
	str("\t\t", spec.Binary)
	for _, a := range args(spec) {
		str("\t\t", a)
	}
	b.WriteString("\t</array>\n")
	key("\t", "EnvironmentVariables")
	b.WriteString("\t<dict>\n")
	for _, e := range environment(spec) {
		key("\t\t", e.Name)
		str("\t\t", e.Value)
	}
	b.WriteString("\t</dict>\n")
	key("\t", "RunAtLoad")
	b.WriteString("\t<true/>\n")
	key("\t", "KeepAlive")
	b.WriteString("\t<dict>\n")
	key("\t\t", "SuccessfulExit")
	b.WriteString("\t\t<false/>\n")
	b.WriteString("\t</dict>\n")
	key("\t", "ProcessType")
	str("\t", "Interactive")
	key("\t", "LimitLoadToSessionType")
	str("\t", "Aqua")
	key("\t", "ExitTimeOut")
	fmt.Fprintf(&b, "\t<integer>%d</integer>\n", stopGraceSeconds)
	key("\t", "StandardOutPath")
	str("\t", filepath.Join(spec.Home, LaunchdStdout))
	key("\t", "StandardErrorPath")
	str("\t", filepath.Join(spec.Home, LaunchdStderr))
	b.WriteString("</dict>\n</plist>\n")
	return b.Bytes()
}

// xmlText escapes s for an XML text node.
func xmlText(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

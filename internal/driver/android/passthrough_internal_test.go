package android

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

const (
	leaseSerial = "emulator-5586"
	otherSerial = "emulator-5588"
)

var (
	leased = driver.Target{Device: driver.Device{ID: "simlock_pixel_1", Address: leaseSerial}}
	remote = driver.Target{Device: leased.Device, Remote: true}
	none   = driver.Target{}
)

// Every command adbArgs lets through, pinned to the lease's serial, or
// acting on no device.
func TestAdbArgsPinsTheLeasesEmulator(t *testing.T) {
	pinned := func(rest ...string) []string { return append([]string{"-s", leaseSerial}, rest...) }
	for _, c := range []struct {
		name string
		t    driver.Target
		args []string
		want []string
	}{
		{"shell", leased, []string{"shell", "ls"}, pinned("shell", "ls")},
		{"the lease's own -s is not repeated", leased, []string{"-s", leaseSerial, "shell", "ls"}, pinned("shell", "ls")},
		{"-s attached", leased, []string{"-s" + leaseSerial, "logcat", "-d"}, pinned("logcat", "-d")},
		{"--serial", leased, []string{"--serial", leaseSerial, "get-state"}, pinned("get-state")},
		{"--serial=", leased, []string{"--serial=" + leaseSerial, "get-serialno"}, pinned("get-serialno")},
		{"-s twice, both the lease's", leased, []string{"-s", leaseSerial, "-s", leaseSerial, "shell", "id"}, pinned("shell", "id")},
		{"a shell word that looks like an option", leased, []string{"shell", "-s", otherSerial}, pinned("shell", "-s", otherSerial)},
		{"kill in a shell command", leased, []string{"shell", "kill", "1234"}, pinned("shell", "kill", "1234")},
		{"install locally", leased, []string{"install", "-r", "/tmp/app.apk"}, pinned("install", "-r", "/tmp/app.apk")},
		{"push locally", leased, []string{"push", "/tmp/a", "/data/local/tmp/a"}, pinned("push", "/tmp/a", "/data/local/tmp/a")},
		{"pull locally", leased, []string{"pull", "/data/local/tmp/a", "/tmp/a"}, pinned("pull", "/data/local/tmp/a", "/tmp/a")},
		{"reverse for a bundler", remote, []string{"reverse", "tcp:8081", "tcp:8081"}, pinned("reverse", "tcp:8081", "tcp:8081")},
		{"forward never takes a port another forward holds", leased, []string{"forward", "tcp:0", "localabstract:chrome_devtools_remote"}, pinned("forward", "--no-rebind", "tcp:0", "localabstract:chrome_devtools_remote")},
		{"forward --no-rebind", leased, []string{"forward", "--no-rebind", "tcp:9000", "tcp:9000"}, pinned("forward", "--no-rebind", "tcp:9000", "tcp:9000")},
		{"forward --list", leased, []string{"forward", "--list"}, pinned("forward", "--list")},
		{"forward --remove", leased, []string{"forward", "--remove", "tcp:9000"}, pinned("forward", "--remove", "tcp:9000")},
		{"reverse --remove", leased, []string{"reverse", "--remove", "tcp:8081"}, pinned("reverse", "--remove", "tcp:8081")},
		{"reverse --remove-all", leased, []string{"reverse", "--remove-all"}, pinned("reverse", "--remove-all")},
		{"emu geo", remote, []string{"emu", "geo", "fix", "-122.08", "37.42"}, pinned("emu", "geo", "fix", "-122.08", "37.42")},
		{"emu in one word", leased, []string{"emu", "sms send 5551234 hello"}, pinned("emu", "sms send 5551234 hello")},
		{"emu avd name", leased, []string{"emu", "avd", "name"}, pinned("emu", "avd", "name")},
		{"emu network speed", leased, []string{"emu", "network", "speed", "full"}, pinned("emu", "network", "speed", "full")},
		{"wait-for-device", leased, []string{"wait-for-device"}, pinned("wait-for-device")},
		{"wait-for-any-device", leased, []string{"wait-for-any-device"}, pinned("wait-for-any-device")},
		{"reboot", leased, []string{"reboot"}, pinned("reboot")},
		{"root", remote, []string{"root"}, pinned("root")},
		{"shell remotely", remote, []string{"shell", "cat", "/data/local/tmp/a.txt"}, pinned("shell", "cat", "/data/local/tmp/a.txt")},
		{"exec-out remotely", remote, []string{"exec-out", "screencap", "-p"}, pinned("exec-out", "screencap", "-p")},

		{"version", leased, []string{"--version"}, []string{"--version"}},
		{"help", none, []string{"--help"}, []string{"--help"}},
		{"version after -s", leased, []string{"-s", leaseSerial, "--version"}, []string{"--version"}},
		{"version verb", none, []string{"version"}, []string{"version"}},
		{"devices without a lease", none, []string{"devices"}, []string{"devices"}},
		{"devices with a lease", leased, []string{"-s", leaseSerial, "devices", "-l"}, []string{"devices", "-l"}},
	} {
		got, serial, err := adbArgs(c.t, c.args)
		wantSerial := ""
		if len(c.want) > 1 && c.want[0] == "-s" {
			wantSerial = leaseSerial
		}
		if err != nil || !slices.Equal(got, c.want) || serial != wantSerial {
			t.Errorf("%s: adbArgs(%q) = %q, %q, %v; want %q, %q", c.name, c.args, got, serial, err, c.want, wantSerial)
		}
	}
}

// Every refusal, with a word its message must give as the reason.
func TestAdbArgsRefuses(t *testing.T) {
	noAddress := driver.Target{Device: driver.Device{ID: "simlock_pixel_1"}}
	for _, c := range []struct {
		name string
		t    driver.Target
		args []string
		why  string
	}{
		// Another device, however it is named.
		{"-s another emulator", leased, []string{"-s", otherSerial, "shell", "cat", "/data/local/tmp/a.txt"}, "not this lease's emulator"},
		{"-s another, attached", leased, []string{"-s" + otherSerial, "reboot"}, "not this lease's emulator"},
		{"--serial another", leased, []string{"--serial", otherSerial, "shell"}, "not this lease's emulator"},
		{"--serial= another", leased, []string{"--serial=" + otherSerial, "shell"}, "not this lease's emulator"},
		{"the lease's -s, then another", leased, []string{"-s", leaseSerial, "-s", otherSerial, "shell"}, "not this lease's emulator"},
		{"a network device", leased, []string{"-s", "10.1.2.3:5555", "shell"}, "not this lease's emulator"},
		{"-s without a value", leased, []string{"-s"}, "needs a serial"},
		{"transport id", leased, []string{"-t", "3", "shell"}, "transport id"},
		{"transport id attached", leased, []string{"-t3", "shell"}, "transport id"},
		{"--transport-id", leased, []string{"--transport-id", "3", "shell"}, "transport id"},
		{"--transport-id=", leased, []string{"--transport-id=3", "shell"}, "transport id"},
		{"usb device", leased, []string{"-d", "shell"}, "by kind"},
		{"emulator by kind", leased, []string{"-e", "shell"}, "by kind"},
		{"server host", leased, []string{"-H", "10.1.2.3", "shell"}, "another server"},
		{"server port", leased, []string{"-P", "5037", "devices"}, "another server"},
		{"server port attached", leased, []string{"-P5037", "devices"}, "another server"},
		{"server socket", leased, []string{"-L", "tcp:5037", "devices"}, "another server"},
		{"listen on all", leased, []string{"-a", "devices"}, "how simlock's server runs"},
		{"one device", leased, []string{"--one-device", "x", "devices"}, "how simlock's server runs"},
		{"unknown option", leased, []string{"--frobnicate", "devices"}, "not one simlock passes"},
		{"-s without a lease", none, []string{"-s", leaseSerial, "shell"}, "no lease names one"},
		{"a device command without a lease", none, []string{"shell", "ls"}, "no lease names one"},
		{"a lease whose emulator has no serial now", noAddress, []string{"shell", "ls"}, "no adb serial"},

		// The server, the host's network, the host's plumbing.
		{"connect", leased, []string{"connect", "10.1.2.3:5555"}, "connect"},
		{"disconnect", leased, []string{"disconnect"}, "disconnect"},
		{"pair", leased, []string{"pair", "10.1.2.3:37000", "123456"}, "pair"},
		{"kill-server", leased, []string{"kill-server"}, "kill-server"},
		{"kill-server after -s", leased, []string{"-s", leaseSerial, "kill-server"}, "kill-server"},
		{"start-server", none, []string{"start-server"}, "start-server"},
		{"reconnect", leased, []string{"reconnect", "offline"}, "reconnect"},
		{"tcpip", leased, []string{"tcpip", "5555"}, "tcpip"},
		{"mdns", leased, []string{"mdns", "services"}, "mdns"},
		{"keygen", leased, []string{"keygen", "/tmp/key"}, "keygen"},
		{"remount", leased, []string{"remount"}, "remount"},
		{"unknown command", leased, []string{"frobnicate"}, "not a command simlock runs"},
		{"commands are case-sensitive", leased, []string{"SHELL", "ls"}, "not a command simlock runs"},
		{"reboot to the bootloader", leased, []string{"reboot", "bootloader"}, "reboots plainly"},
		{"no command", leased, nil, "give adb a command"},
		{"options only", leased, []string{"-s", leaseSerial}, "no adb command"},

		// forward and reverse keep TCP on the host.
		{"forward from a host file socket", leased, []string{"forward", "localfilesystem:/tmp/sock", "tcp:1"}, "TCP port"},
		{"forward from a host abstract socket", leased, []string{"forward", "localabstract:x", "tcp:1"}, "TCP port"},
		{"forward from a host device node", leased, []string{"forward", "dev:/dev/ttyS0", "tcp:1"}, "TCP port"},
		{"forward to no socket", leased, []string{"forward", "tcp:1", "bogus:2"}, "not a socket on the device"},
		{"forward --remove of a host socket", leased, []string{"forward", "--remove", "localabstract:x"}, "TCP port"},
		{"reverse to a host abstract socket", leased, []string{"reverse", "tcp:8081", "localabstract:x"}, "TCP port"},
		{"reverse to another host", leased, []string{"reverse", "tcp:8081", "tcp:10.1.2.3:80"}, "TCP port"},
		{"forward with one socket", leased, []string{"forward", "tcp:1"}, "adb forward takes"},
		{"forward --remove-all drops every lease's forwards", leased, []string{"forward", "--remove-all"}, "one table of forwards"},
		{"forward from a remote caller", remote, []string{"forward", "tcp:9222", "localabstract:chrome_devtools_remote"}, "only a caller on that machine"},
		{"forward --list from a remote caller", remote, []string{"forward", "--list"}, "only a caller on that machine"},
		{"forward --remove from a remote caller", remote, []string{"forward", "--remove", "tcp:9222"}, "only a caller on that machine"},

		// The emulator console: snapshots, its life, the host.
		{"snapshot save over the baseline", leased, []string{"emu", "avd", "snapshot", "save", "simlock_clean_baseline"}, "snapshot"},
		{"snapshot save in one word", leased, []string{"emu", "avd snapshot save simlock_clean_baseline"}, "snapshot"},
		{"snapshot save upper case", leased, []string{"emu", "AVD", "SNAPSHOT", "SAVE", "x"}, "snapshot"},
		{"snapshot load", leased, []string{"emu", "avd", "snapshot", "load", "implant"}, "snapshot"},
		{"snapshot delete", leased, []string{"emu", "avd", "snapshot", "delete", "simlock_clean_baseline"}, "snapshot"},
		{"snapshot list", leased, []string{"emu", "avd", "snapshot", "list"}, "snapshot"},
		{"a second command on a new line", leased, []string{"emu", "geo fix 1 2\navd snapshot save simlock_clean_baseline"}, "control characters"},
		{"emu kill", leased, []string{"emu", "kill"}, "release the lease"},
		{"emu avd stop", leased, []string{"emu", "avd", "stop"}, "release the lease"},
		{"emu avd path", leased, []string{"emu", "avd", "path"}, "only avd name and avd status"},
		{"emu screenrecord", leased, []string{"emu", "screenrecord", "start", "/tmp/x.webm"}, "writes files"},
		{"emu network capture", leased, []string{"emu", "network", "capture", "start", "/tmp/x.pcap"}, "writes a file"},
		{"emu redir", leased, []string{"emu", "redir", "add", "tcp:5000:6000"}, "network of simlock's machine"},
		{"emu qemu", leased, []string{"emu", "qemu", "monitor"}, "not a console command simlock passes"},
		{"emu alone", leased, []string{"emu"}, "needs a console command"},
	} {
		assertRefused(t, c.name, c.t, c.args, c.why)
	}
}

// From a remote surface, every command that names a file of this machine
// is refused, and the refusal names the routes that move files instead.
func TestAdbArgsRefusesHostFilesToARemoteCaller(t *testing.T) {
	for _, args := range [][]string{
		{"pull", "/data/x", "/home/u/.ssh/authorized_keys"},
		{"pull", "/data/x"}, // into the daemon's working directory
		{"push", "/etc/passwd", "/data/local/tmp/p"},
		{"install", "/tmp/app.apk"},
		{"install-multiple", "/tmp/a.apk", "/tmp/b.apk"},
		{"install-multi-package", "/tmp/a.apk"},
		{"sync", "data"},
		{"sideload", "/tmp/ota.zip"},
		{"backup", "-f", "/tmp/b.ab"},
		{"restore", "/tmp/b.ab"},
		{"bugreport", "/tmp/report.zip"},
		{"-s", leaseSerial, "pull", "/data/x", "/tmp/y"},
	} {
		assertRefused(t, strings.Join(args, " "), remote, args, "/v1/leases/{id}/files")
	}
}

func assertRefused(t *testing.T, name string, tgt driver.Target, args []string, why string) {
	t.Helper()
	got, _, err := adbArgs(tgt, args)
	var refused *driver.PassthroughRefusedError
	if !errors.As(err, &refused) || refused.Tool != "adb" {
		t.Errorf("%s: adbArgs(%q) = %q, %v; want refused", name, args, got, err)
		return
	}
	if !strings.Contains(refused.Message, why) {
		t.Errorf("%s: refusal %q does not say %q", name, refused.Message, why)
	}
	if code := driver.ContractError(err).Code; code != contract.CodePassthroughRefused {
		t.Errorf("%s: code %s, want PASSTHROUGH_REFUSED", name, code)
	}
}

// hostFileVerbs are the adb commands that read or write files of the
// machine adb runs on, restated here apart from adbVerbs so the fuzz target
// checks the rule rather than the table.
var hostFileVerbs = []string{"push", "pull", "sync", "install", "install-multiple", "install-multi-package", "sideload", "backup", "restore", "bugreport", "keygen"}

// deviceless are the commands that may run unpinned.
var deviceless = []string{"--version", "--help", "version", "help", "devices"}

// FuzzAdbArgs: whatever the arguments, a command adbArgs lets through
// names no device but the target's (one -s, the target's serial, and no
// other selector before the command), leaves the server alone, and, for a
// remote target, names no file of the host.
func FuzzAdbArgs(f *testing.F) {
	for _, seed := range []string{
		"shell\x00ls",
		"-s\x00" + otherSerial + "\x00shell\x00cat /data/local/tmp/a.txt",
		"-s" + leaseSerial + "\x00-s\x00" + otherSerial + "\x00reboot",
		"--serial=" + otherSerial + "\x00shell",
		"-t\x003\x00shell",
		"-e\x00-d\x00shell",
		"-H\x0010.1.2.3\x00-P\x005037\x00shell",
		"connect\x0010.1.2.3:5555",
		"pull\x00/data/x\x00/tmp/y",
		"push\x00/etc/passwd\x00/data/p",
		"install\x00/tmp/a.apk",
		"emu\x00avd snapshot save simlock_clean_baseline",
		"emu\x00geo fix 1 2\navd snapshot save x",
		"emu\x00AVD\x00Snapshot\x00load\x00x",
		"forward\x00localfilesystem:/tmp/x\x00tcp:1",
		"reverse\x00tcp:8081\x00tcp:8081",
		"forward\x00tcp:9222\x00localabstract:x",
		"forward\x00--remove-all",
		"--version\x00kill-server",
		"devices",
		"wait-for-any-device",
	} {
		f.Add(seed, false, true)
		f.Add(seed, true, true)
		f.Add(seed, false, false)
	}
	f.Fuzz(func(t *testing.T, joined string, isRemote, hasDevice bool) {
		args := strings.Split(joined, "\x00")
		tgt := driver.Target{Remote: isRemote}
		if hasDevice {
			tgt.Device = leased.Device
		}
		out, serial, err := adbArgs(tgt, args)
		if err != nil {
			var refused *driver.PassthroughRefusedError
			if !errors.As(err, &refused) {
				t.Fatalf("adbArgs(%q) failed with %T %v, not a refusal", args, err, err)
			}
			return
		}
		if len(out) == 0 {
			t.Fatalf("adbArgs(%q) passed with no arguments", args)
		}
		verb := out[0]
		if out[0] == "-s" {
			if !hasDevice || len(out) < 3 || out[1] != leaseSerial || serial != leaseSerial {
				t.Fatalf("adbArgs(%q) = %q: pinned to %q, want the target's %s", args, out, out[1], leaseSerial)
			}
			verb = out[2]
		} else if !slices.Contains(deviceless, verb) || serial != "" {
			t.Fatalf("adbArgs(%q) = %q: %s runs unpinned", args, out, verb)
		}
		if strings.HasPrefix(verb, "-") && verb != "--version" && verb != "--help" {
			t.Fatalf("adbArgs(%q) = %q: a global option %s after the pin", args, out, verb)
		}
		if slices.Contains([]string{"connect", "disconnect", "pair", "kill-server", "start-server", "reconnect", "tcpip"}, verb) {
			t.Fatalf("adbArgs(%q) = %q: %s reaches the server or the network", args, out, verb)
		}
		if isRemote && slices.Contains(hostFileVerbs, verb) {
			t.Fatalf("adbArgs(%q) = %q: %s names a host file for a remote caller", args, out, verb)
		}
		if verb == "emu" {
			line := strings.Join(out[3:], " ")
			words := strings.Fields(strings.ToLower(line))
			if strings.ContainsAny(line, "\n\r") || len(words) == 0 || words[0] == "kill" ||
				(words[0] == "avd" && len(words) > 1 && words[1] != "name" && words[1] != "status") {
				t.Fatalf("adbArgs(%q) = %q: emu %q reaches simlock's state", args, out, line)
			}
		}
		if verb == "forward" {
			// The host's forwards are one table of the server, every
			// lease's: a forward takes no port another holds, none are
			// dropped wholesale, and a remote caller, who cannot reach
			// the port, opens none.
			flags := out[3:]
			if isRemote {
				t.Fatalf("adbArgs(%q) = %q: a forward on the host for a remote caller", args, out)
			}
			if slices.Contains(flags, "--remove-all") {
				t.Fatalf("adbArgs(%q) = %q: removes every lease's forwards", args, out)
			}
			if len(flags) > 0 && flags[0] != "--list" && flags[0] != "--remove" && flags[0] != "--no-rebind" {
				t.Fatalf("adbArgs(%q) = %q: a forward that may rebind another lease's port", args, out)
			}
		}
		if verb == "forward" || verb == "reverse" {
			var sockets []string
			for _, a := range out[3:] {
				if !strings.HasPrefix(a, "--") {
					sockets = append(sockets, a)
				}
			}
			host := ""
			switch {
			case len(sockets) == 2 && verb == "forward":
				host = sockets[0]
			case len(sockets) == 2:
				host = sockets[1]
			case len(sockets) == 1 && verb == "forward":
				host = sockets[0] // --remove
			}
			if host != "" && !regexp.MustCompile(`^tcp:[0-9]+$`).MatchString(host) {
				t.Fatalf("adbArgs(%q) = %q: the host's side is %q, not a TCP port", args, out, host)
			}
		}
	})
}

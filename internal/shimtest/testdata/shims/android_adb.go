package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const androidAdbVersion = "Android Debug Bridge version 1.0.41\nVersion 36.0.0-13206524"

// androidAdb is adb. Global options -P, -s, -t, -d, -e, -a, -H, -L,
// nodaemon and fork-server come first. The server port is -P, else the
// port of -L tcp:<port>, else $ANDROID_ADB_SERVER_PORT, else 5037, and every
// device command needs a server listening there. Unlike real adb, the shim
// starts one for a device command only with the setting ADB_AUTOSTART=1.
//
//   - nodaemon server, fork-server server: the fake server in the
//     foreground, a real TCP listener answering host:version,
//     host:emulator:<port> and host:kill (refused when
//     ADB_REJECT_KILL_SERVER=1).
//   - start-server: that server in the background, started as adb starts
//     one (adb -L tcp:<port> fork-server server --reply-fd N);
//     kill-server: host:kill.
//   - devices: the emulators reporting to this server; one told to die
//     stays listed as offline until its process has exited.
//   - shell getprop sys.boot_completed | init.svc.bootanim |
//     ro.boot.qemu.avd_name | ro.build.version.sdk, pm list packages -3,
//     and echo 'TEXT' > PATH, cat PATH and rm PATH on the guest's files;
//     several commands may be joined with ";" in one argument. shell hold
//     FIFO runs until it is stopped and reports how on the host's FIFO
//     (see androidShellOne).
//   - emu kill, emu avd stop|name|path, emu avd snapshot save|list|load|delete.
//   - install X.apk, uninstall PKG, get-serialno, get-state, reboot (it
//     says so).
//   - push, pull (a guest file written on the host: REMOTE [LOCAL]) and
//     exec-out screencap -p (see android_files.go).
//   - anything else echoes its arguments and exits 0.
func androidAdb(args []string) int {
	port, listen := "", ""
	serial := os.Getenv("ANDROID_SERIAL")
	nodaemon, forked := false, false
	i := 0
options:
	for ; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "-P":
			port = next()
		case a == "-s":
			serial = next()
		case a == "-L":
			listen = next()
		case a == "-t" || a == "-H":
			next()
		case a == "-d" || a == "-e" || a == "-a":
		case a == "nodaemon":
			nodaemon = true
		case a == "fork-server":
			forked = true
		case a == "--version" || a == "version":
			fmt.Printf("%s\nInstalled as %s\nRunning on Linux (%s)\n", androidAdbVersion, os.Args[0], "x86_64")
			return 0
		case a == "--help" || a == "help":
			fmt.Println(androidAdbVersion + "\n\nglobal options:\n -s SERIAL  use device with given serial\n -P PORT    port of adb server")
			return 0
		case strings.HasPrefix(a, "-P"):
			port = a[2:]
		case strings.HasPrefix(a, "-s"):
			serial = a[2:]
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(os.Stderr, "adb: unknown option %s\n", a)
			return 1
		default:
			break options
		}
	}
	if spec, ok := strings.CutPrefix(listen, "tcp:"); port == "" && ok {
		port = spec[strings.LastIndex(spec, ":")+1:]
	}
	if port == "" {
		port = os.Getenv("ANDROID_ADB_SERVER_PORT")
	}
	if port == "" {
		port = "5037"
	}
	rest := args[i:]
	if len(rest) == 0 {
		fmt.Fprintln(os.Stderr, "adb: no command given; try adb --help")
		return 1
	}
	var keys []string
	for n := min(len(rest), 4); n >= 1; n-- {
		keys = append(keys, strings.Join(rest[:n], "-"))
	}
	if code, failed := androidFail("adb", keys...); failed {
		return code
	}
	switch rest[0] {
	case "server":
		if !nodaemon && !forked {
			fmt.Fprintln(os.Stderr, "adb: the shim runs a server only as `adb nodaemon server` or `adb fork-server server`")
			return 1
		}
		return androidAdbServe(port)
	case "start-server":
		return androidStartServer(port)
	case "kill-server":
		return androidKillServer(port)
	case "devices", "shell", "emu", "install", "uninstall", "get-serialno", "get-state", "push", "pull", "exec-out", "reboot":
		if !androidDial(port) && (setting("ADB_AUTOSTART") != "1" || androidStartServer(port) != 0) {
			fmt.Fprintf(os.Stderr, "adb: cannot connect to daemon at tcp:127.0.0.1:%s: Connection refused\n", port)
			return 1
		}
	default:
		fmt.Println(strings.Join(rest, " "))
		return 0
	}
	sp, _ := strconv.Atoi(port)
	var visible []androidEmulator
	withLock(func() {
		for _, e := range androidEmulators() {
			if e.ServerPort == sp {
				visible = append(visible, e)
			}
		}
	})
	sort.Slice(visible, func(a, b int) bool { return visible[a].Port < visible[b].Port })
	if rest[0] == "devices" {
		fmt.Println("List of devices attached")
		for _, e := range visible {
			state := "device"
			if !e.online() || e.Killed {
				state = "offline"
			}
			fmt.Printf("emulator-%d\t%s\n", e.Port, state)
		}
		fmt.Println()
		return 0
	}
	var dev *androidEmulator
	switch {
	case serial != "":
		for k := range visible {
			if fmt.Sprintf("emulator-%d", visible[k].Port) == serial {
				dev = &visible[k]
			}
		}
		if dev == nil {
			fmt.Fprintf(os.Stderr, "adb: device '%s' not found\n", serial)
			return 1
		}
	case len(visible) == 0:
		fmt.Fprintln(os.Stderr, "adb: no devices/emulators found")
		return 1
	case len(visible) > 1:
		fmt.Fprintln(os.Stderr, "adb: more than one device/emulator")
		return 1
	default:
		dev = &visible[0]
	}
	// An emulator told to die stays listed, offline, until it has exited.
	if dev.Killed {
		fmt.Fprintln(os.Stderr, "adb: device offline")
		return 1
	}
	if rest[0] == "emu" {
		return androidEmu(*dev, rest[1:])
	}
	if !dev.online() {
		fmt.Fprintln(os.Stderr, "adb: device offline")
		return 1
	}
	switch rest[0] {
	case "get-serialno":
		fmt.Printf("emulator-%d\n", dev.Port)
	case "get-state":
		fmt.Println("device")
	case "shell":
		return androidShell(*dev, strings.TrimSpace(strings.Join(rest[1:], " ")))
	case "install":
		return androidInstall(*dev, rest[1:])
	case "uninstall":
		return androidUninstall(*dev, rest[1:])
	case "push":
		return androidPush(*dev, rest[1:])
	case "pull":
		return androidPull(*dev, rest[1:])
	case "exec-out":
		return androidExecOut(*dev, rest[1:])
	case "reboot":
		fmt.Printf("emulator-%d rebooting\n", dev.Port)
	}
	return 0
}

func androidDial(port string) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// androidShell runs a shell command line on the device: commands separated
// by ";", each one of those androidShellOne knows, the exit code the last
// one's.
func androidShell(e androidEmulator, line string) int {
	code := 0
	for _, cmd := range strings.Split(line, ";") {
		code = androidShellOne(e, strings.TrimSpace(cmd))
	}
	return code
}

// androidShellOne runs one shell command: getprop, pm list packages -3, and
// for files under /data `echo 'TEXT' > PATH`, `cat PATH [2>/dev/null] [||
// true]` and `rm [-f] PATH`. Anything else echoes itself.
func androidShellOne(e androidEmulator, cmd string) int {
	if words := strings.Fields(cmd); len(words) > 0 {
		switch words[0] {
		case "echo":
			if text, path, ok := strings.Cut(strings.TrimPrefix(cmd, "echo"), ">"); ok {
				path = strings.TrimSpace(path)
				text = strings.Trim(strings.TrimSpace(text), "'\"")
				withLock(func() {
					g := androidLoadGuest(e.AvdDir)
					if g.Files == nil {
						g.Files = map[string]string{}
					}
					g.Files[path] = text + "\n"
					androidSaveGuest(e.AvdDir, g)
				})
				return 0
			}
		case "cat":
			if len(words) < 2 {
				break
			}
			var text string
			var found bool
			withLock(func() { text, found = androidLoadGuest(e.AvdDir).Files[words[1]] })
			if found {
				fmt.Print(text)
				return 0
			}
			if !slices.Contains(words, "2>/dev/null") {
				fmt.Fprintf(os.Stderr, "cat: %s: No such file or directory\n", words[1])
			}
			if strings.HasSuffix(cmd, "|| true") {
				return 0
			}
			return 1
		case "hold":
			// hold FIFO stands for a command that runs until it is
			// stopped: it says ready, opens FIFO (a named pipe the test
			// reads) and, told SIGTERM or SIGINT, writes "terminated" to
			// it and exits 143. Killed, it writes nothing.
			if len(words) != 2 {
				break
			}
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
			fmt.Println("ready")
			f, err := os.OpenFile(words[1], os.O_WRONLY, 0)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			<-sigs
			fmt.Fprintln(f, "terminated")
			f.Close()
			return 143
		case "monkey":
			return androidMonkey(e, words)
		case "am":
			// A view intent of a scheme no app of the stand-in claims: am
			// says so on stdout and exits 0, as it does.
			if i := slices.Index(words, "-d"); len(words) > 1 && words[1] == "start" && i >= 0 && i+1 < len(words) && strings.HasPrefix(strings.Trim(words[i+1], "'"), "nohandler:") {
				u := strings.Trim(words[i+1], "'")
				fmt.Printf("Starting: Intent { act=android.intent.action.VIEW dat=%s }\nError: Activity not started, unable to resolve Intent { act=android.intent.action.VIEW dat=%s flg=0x10000000 }\n", u, u)
				return 0
			}
		case "logcat":
			fmt.Println("--------- beginning of main")
			for i := 1; i <= 3; i++ {
				fmt.Printf("01-01 12:00:0%d.000  1000  1000 I ActivityManager: line %d of emulator-%d: %s\n", i, i, e.Port, cmd)
			}
			return 0
		case "rm":
			path := words[len(words)-1]
			withLock(func() {
				g := androidLoadGuest(e.AvdDir)
				delete(g.Files, path)
				androidSaveGuest(e.AvdDir, g)
			})
			return 0
		}
	}
	switch cmd {
	case "getprop sys.boot_completed":
		// A real emulator answers adb well before its boot completes, so
		// the first answer of each boot is "not yet", however fast the
		// boot (or slow the machine) is.
		marker := filepath.Join(e.AvdDir, androidProbedMarker)
		if _, err := os.Stat(marker); err != nil {
			_ = os.WriteFile(marker, nil, 0o644)
			fmt.Println()
		} else if e.booted() {
			fmt.Println("1")
		} else {
			fmt.Println()
		}
	case "getprop init.svc.bootanim":
		if e.booted() {
			fmt.Println("stopped")
		} else {
			fmt.Println("running")
		}
	case "getprop ro.boot.qemu.avd_name":
		fmt.Println(e.Avd)
	case "getprop ro.build.version.sdk":
		cfg, _ := androidReadIni(filepath.Join(e.AvdDir, "config.ini"))
		fmt.Println(strings.TrimPrefix(strings.Split(cfg["image.sysdir.1"], "/")[1], "android-"))
	case "pm list packages -3":
		var pkgs []string
		withLock(func() { pkgs = androidUserdata(e.AvdDir) })
		for _, p := range pkgs {
			fmt.Println("package:" + p)
		}
	default:
		fmt.Println(cmd)
	}
	return 0
}

func androidInstall(e androidEmulator, args []string) int {
	var apk string
	for _, a := range args {
		if strings.HasSuffix(a, ".apk") {
			apk = a
		}
	}
	if apk == "" {
		fmt.Fprintln(os.Stderr, "adb: need APK file on command line")
		return 1
	}
	if !e.booted() {
		fmt.Fprintln(os.Stderr, "cmd: Can't find service: package")
		return 1
	}
	pkg := androidInstalledName(apk)
	withLock(func() {
		pkgs := androidUserdata(e.AvdDir)
		if !slices.Contains(pkgs, pkg) {
			androidSaveUserdata(e.AvdDir, append(pkgs, pkg))
		}
	})
	fmt.Println("Performing Streamed Install\nSuccess")
	return 0
}

func androidUninstall(e androidEmulator, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "adb: usage: adb uninstall [-k] PACKAGE")
		return 1
	}
	pkg := args[len(args)-1]
	found := false
	withLock(func() {
		pkgs := androidUserdata(e.AvdDir)
		found = slices.Contains(pkgs, pkg)
		androidSaveUserdata(e.AvdDir, slices.DeleteFunc(pkgs, func(p string) bool { return p == pkg }))
	})
	if !found {
		fmt.Println("Failure [DELETE_FAILED_INTERNAL_ERROR]")
		return 1
	}
	fmt.Println("Success")
	return 0
}

// androidEmu answers emulator console commands, with the console's \r\n
// line ends and OK / KO replies.
func androidEmu(e androidEmulator, args []string) int {
	words := strings.Fields(strings.Join(args, " "))
	ok := func(lines ...string) int {
		for _, l := range lines {
			fmt.Print(l + "\r\n")
		}
		fmt.Print("OK\r\n")
		return 0
	}
	ko := func(msg string) int {
		fmt.Print("KO: " + msg + "\r\n")
		return 0
	}
	snapshots := filepath.Join(e.AvdDir, "snapshots")
	arg := func(n int) string {
		if n < len(words) {
			return words[n]
		}
		return ""
	}
	switch {
	case len(words) == 1 && words[0] == "kill", len(words) == 2 && words[0] == "avd" && words[1] == "stop":
		withLock(func() {
			ems := androidEmulators()
			if cur, found := ems[e.Port]; found && cur.Pid == e.Pid {
				cur.Killed = true
				ems[e.Port] = cur
				save(androidEmulatorsFile, ems)
			}
		})
		if words[0] == "kill" {
			fmt.Print("OK: killing emulator, bye bye\r\n")
			return 0
		}
		return ok()
	case len(words) == 4 && words[0] == "geo" && words[1] == "fix":
		for _, w := range words[2:] {
			if _, err := strconv.ParseFloat(w, 64); err != nil {
				return ko("bad coordinate " + w)
			}
		}
		return ok()
	case len(words) == 2 && words[0] == "avd" && words[1] == "name":
		return ok(e.Avd)
	case len(words) == 2 && words[0] == "avd" && words[1] == "path":
		return ok(e.AvdDir)
	case len(words) >= 3 && words[0] == "avd" && words[1] == "snapshot":
		name := arg(3)
		switch words[2] {
		case "list":
			entries, _ := os.ReadDir(snapshots)
			lines := []string{"List of snapshots present on all disks:", "ID        TAG                 VM SIZE                DATE       VM CLOCK"}
			for n, s := range entries {
				if s.IsDir() {
					lines = append(lines, fmt.Sprintf("--        %-19s 1.2G 2026-05-01 10:00:0%d   00:00:12.000", s.Name(), n%10))
				}
			}
			return ok(lines...)
		case "save":
			if name == "" {
				return ko("missing snapshot name")
			}
			withLock(func() {
				os.MkdirAll(filepath.Join(snapshots, name), 0o755)
				os.WriteFile(filepath.Join(snapshots, name, "snapshot.pb"), []byte(e.Avd), 0o644)
				androidCopyFile(filepath.Join(e.AvdDir, androidUserdataFile), filepath.Join(snapshots, name, androidUserdataFile))
			})
			return ok()
		case "load":
			if _, err := os.Stat(filepath.Join(snapshots, name, "snapshot.pb")); name == "" || err != nil {
				return ko(fmt.Sprintf("snapshot '%s' does not exist", name))
			}
			withLock(func() {
				androidCopyFile(filepath.Join(snapshots, name, androidUserdataFile), filepath.Join(e.AvdDir, androidUserdataFile))
			})
			return ok()
		case "delete":
			if err := os.RemoveAll(filepath.Join(snapshots, name)); name == "" || err != nil {
				return ko("could not delete snapshot")
			}
			return ok()
		}
	}
	return ko("unknown command, try 'help'")
}

// androidAdbServe is the fake adb server: it listens on 127.0.0.1:port and
// answers adb's smart-socket requests (four hex digits of length, then the
// request) until SIGTERM, SIGINT or an accepted host:kill.
func androidAdbServe(port string) int {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "* failed to start daemon\nerror: could not install *smartsocket* listener: cannot bind to 127.0.0.1:%s: Address already in use (98)\n", port)
		return 1
	}
	p, _ := strconv.Atoi(port)
	me := androidServer{Port: p, Pid: os.Getpid(), RejectKill: os.Getenv("ADB_REJECT_KILL_SERVER") == "1"}
	withLock(func() {
		servers := map[int]androidServer{}
		load(androidServersFile, &servers)
		servers[p] = me
		save(androidServersFile, servers)
	})
	forget := func() {
		l.Close()
		withLock(func() {
			servers := map[int]androidServer{}
			load(androidServersFile, &servers)
			if s, ok := servers[p]; ok && s.Pid == me.Pid {
				delete(servers, p)
				save(androidServersFile, servers)
			}
		})
	}
	fmt.Printf("adb server listening on tcp:%s (pid %d)\n", port, me.Pid)
	quit := make(chan string, 1)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				var n [4]byte
				if _, err := io.ReadFull(c, n[:]); err != nil {
					return // a port probe
				}
				size, err := strconv.ParseUint(string(n[:]), 16, 16)
				if err != nil {
					return
				}
				req := make([]byte, size)
				if _, err := io.ReadFull(c, req); err != nil {
					return
				}
				reply := func(status, msg string) {
					if msg == "" && status == "OKAY" {
						io.WriteString(c, status)
						return
					}
					fmt.Fprintf(c, "%s%04x%s", status, len(msg), msg)
				}
				switch r := string(req); {
				case r == "host:version":
					reply("OKAY", "0029")
				case strings.HasPrefix(r, "host:emulator:"):
					adbPort, _ := strconv.Atoi(strings.TrimPrefix(r, "host:emulator:"))
					withLock(func() {
						servers := map[int]androidServer{}
						load(androidServersFile, &servers)
						if s, ok := servers[p]; ok && s.Pid == me.Pid {
							s.Announced = append(s.Announced, adbPort)
							servers[p] = s
							save(androidServersFile, servers)
						}
					})
					io.WriteString(c, "OKAY")
				case r == "host:kill":
					if me.RejectKill {
						reply("FAIL", "kill-server rejected by remote server")
						return
					}
					io.WriteString(c, "OKAY")
					quit <- "host:kill"
				default:
					reply("FAIL", "unknown host service")
				}
			}()
		}
	}()
	select {
	case sig := <-sigs:
		fmt.Printf("adb server: %s; exiting\n", sig)
	case why := <-quit:
		fmt.Printf("adb server: %s; exiting\n", why)
	}
	forget()
	return 0
}

// androidStartServer starts the fake server in the background unless one
// listens already, with the command line adb gives the servers it starts.
func androidStartServer(port string) int {
	if androidDial(port) {
		return 0
	}
	fmt.Fprintf(os.Stderr, "* daemon not running; starting now at tcp:%s\n", port)
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "* failed to start daemon:", err)
		return 1
	}
	// argv[0] stays this adb's path, so the re-executed shim is adb again
	// and a test can tell the server is its own.
	cmd := &exec.Cmd{Path: exe, Args: []string{os.Args[0], "-L", "tcp:" + port, "fork-server", "server", "--reply-fd", "3"}, Env: os.Environ(),
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "* failed to start daemon:", err)
		return 1
	}
	cmd.Process.Release()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if androidDial(port) {
			fmt.Fprintln(os.Stderr, "* daemon started successfully")
			return 0
		}
	}
	fmt.Fprintln(os.Stderr, "* failed to start daemon\nadb: cannot connect to daemon")
	return 1
}

// androidKillServer sends host:kill; a server started with
// ADB_REJECT_KILL_SERVER=1 refuses it.
func androidKillServer(port string) int {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), time.Second)
	if err != nil {
		return 0 // nothing to kill
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "%04x%s", len("host:kill"), "host:kill")
	var status [4]byte
	if _, err := io.ReadFull(c, status[:]); err != nil {
		fmt.Fprintln(os.Stderr, "adb: kill-server: no reply from the server")
		return 1
	}
	if string(status[:]) == "FAIL" {
		var n [4]byte
		io.ReadFull(c, n[:])
		size, _ := strconv.ParseUint(string(n[:]), 16, 16)
		msg := make([]byte, size)
		io.ReadFull(c, msg)
		fmt.Fprintf(os.Stderr, "adb: kill-server: %s\n", msg)
		return 1
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !androidDial(port) {
			return 0
		}
	}
	return 0
}

// androidMonkey stands for monkey -p PKG …: it starts an installed
// package's launcher activity, and aborts for one the device does not have.
func androidMonkey(e androidEmulator, words []string) int {
	at := slices.Index(words, "-p")
	if at < 0 || at+1 >= len(words) {
		fmt.Println(strings.Join(words, " "))
		return 0
	}
	pkg := words[at+1]
	var pkgs []string
	withLock(func() { pkgs = androidUserdata(e.AvdDir) })
	if !slices.Contains(pkgs, pkg) {
		fmt.Println("** No activities found to run, monkey aborted.")
		return 252
	}
	fmt.Println("Events injected: 1")
	return 0
}

package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Boot times of the fake emulator: a snapshot restore is quick, a cold boot
// slower, a wipe slower still.
const (
	androidSnapshotBoot = 40 * time.Millisecond
	androidColdBoot     = 80 * time.Millisecond
	androidWipeBoot     = 100 * time.Millisecond
	// androidEmulatorPoll is how often a running emulator checks whether
	// `adb emu kill` asked it to go.
	androidEmulatorPoll = 20 * time.Millisecond
)

const androidEmulatorVersion = "Android emulator version 36.1.9.0 (build_id 13823996) (CL:N/A)"

// androidEmulatorTool is emulator: -version, -list-avds, or a launch
// (-avd NAME [-port P] [-snapshot S] [-wipe-data] [-no-snapshot-load] ...)
// that runs until `adb emu kill`, SIGTERM or SIGINT. It listens on the
// console port and the adb port above it, as the real one does, so a port
// probe sees it.
func androidEmulatorTool(args []string) int {
	var avd, snapshot string
	port := 0
	wipe, noLoad := false, false
	for i := 0; i < len(args); i++ {
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch a := args[i]; a {
		case "-version", "--version":
			fmt.Println(androidEmulatorVersion)
			fmt.Println("Copyright (C) 2006-2025 The Android Open Source Project and many others.")
			return 0
		case "-list-avds":
			inis, _ := filepath.Glob(filepath.Join(androidAVDHome(), "*.ini"))
			for _, ini := range inis {
				fmt.Println(strings.TrimSuffix(filepath.Base(ini), ".ini"))
			}
			return 0
		case "-avd":
			avd = next()
		case "-port":
			port, _ = strconv.Atoi(next())
		case "-snapshot":
			snapshot = next()
		case "-wipe-data":
			wipe = true
		case "-no-snapshot-load":
			noLoad = true
		case "-gpu", "-memory", "-cores", "-partition-size", "-sdcard", "-skin", "-camera-back", "-camera-front", "-netdelay", "-netspeed", "-qemu":
			next()
		default:
			if strings.HasPrefix(a, "@") {
				avd = a[1:]
			}
		}
	}
	if avd == "" {
		fmt.Fprintln(os.Stderr, "ERROR | No AVD specified. Use '@foo' or '-avd foo' to launch a virtual device named 'foo'")
		return 1
	}
	props, err := androidReadIni(filepath.Join(androidAVDHome(), avd+".ini"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "PANIC: Unknown AVD name [%s], use -list-avds to see valid list.\n", avd)
		return 1
	}
	dir := props["path"]
	if _, err := os.Stat(filepath.Join(dir, "config.ini")); err != nil {
		fmt.Fprintf(os.Stderr, "PANIC: Broken AVD system path. Check your ANDROID_SDK_ROOT value [%s]!\n", os.Getenv("ANDROID_SDK_ROOT"))
		return 1
	}
	if port == 0 {
		port = 5554
	}
	if port%2 != 0 || port < 5554 || port > 5682 {
		fmt.Fprintln(os.Stderr, "ERROR | -port must be followed by an even integer number between 5554 and 5682")
		return 1
	}
	console, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "ERROR | console port %d is already used\n", port)
		return 1
	}
	defer console.Close()
	adbl, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "ERROR | adb port %d is already used\n", port+1)
		return 1
	}
	defer adbl.Close()
	// Injected failures apply to a launch that got its ports, so that a
	// launch losing a port race does not use them up.
	if code, failed := androidFail("emulator", "boot"); failed {
		return code
	}
	_, _, hang := failure("emulator", "boot-hang")
	for _, l := range []net.Listener{console, adbl} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}

	serverPort, _ := strconv.Atoi(os.Getenv("ANDROID_ADB_SERVER_PORT"))
	if serverPort == 0 {
		serverPort = 5037
	}
	snapDir := filepath.Join(dir, "snapshots", snapshot)
	fromSnapshot := snapshot != "" && !noLoad && !wipe
	if fromSnapshot {
		if _, err := os.Stat(snapDir); err != nil {
			fmt.Printf("WARNING | Snapshot '%s' does not exist; cold booting\n", snapshot)
			fromSnapshot = false
		}
	}
	boot := androidColdBoot
	switch {
	case wipe:
		boot = androidWipeBoot
	case fromSnapshot:
		boot = androidSnapshotBoot
	}
	// The boot starts now: its first sys.boot_completed answer is "not yet".
	_ = os.Remove(filepath.Join(dir, androidProbedMarker))
	now := time.Now()
	me := androidEmulator{Port: port, Avd: avd, AvdDir: dir, Pid: os.Getpid(), ServerPort: serverPort,
		StartedAt: now.UnixMilli(), BootAt: now.Add(boot).UnixMilli()}
	if hang {
		me.BootAt = 0
	}
	var clash string
	withLock(func() {
		ems := androidEmulators()
		for _, e := range ems {
			switch {
			case e.Port == port:
				clash = fmt.Sprintf("console port %d is already used", port)
			case e.AvdDir == dir:
				clash = "Running multiple emulators with the same AVD is an experimental feature.\nPlease use -read-only flag to enable this feature."
			}
		}
		if clash != "" {
			return
		}
		ems[port] = me
		save(androidEmulatorsFile, ems)
		// The disks, as the boot mode leaves them.
		switch {
		case wipe:
			androidSaveGuest(dir, androidGuest{})
		case fromSnapshot:
			androidCopyFile(filepath.Join(snapDir, androidUserdataFile), filepath.Join(dir, androidUserdataFile))
		}
	})
	if clash != "" {
		fmt.Fprintln(os.Stderr, "ERROR | "+clash)
		return 1
	}
	fmt.Println("INFO | " + androidEmulatorVersion)
	fmt.Printf("INFO | Started %s on console port %d, reporting to the adb server on %d\n", avd, port, serverPort)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(androidEmulatorPoll)
	defer tick.Stop()
	announced := false
	for {
		select {
		case sig := <-sigs:
			androidForgetEmulator(port)
			fmt.Printf("INFO | Received %s; shutting down\n", sig)
			return 0
		case <-tick.C:
		}
		gone := false
		withLock(func() {
			ems := map[int]androidEmulator{}
			load(androidEmulatorsFile, &ems)
			e, ok := ems[port]
			gone = !ok || e.Pid != me.Pid || e.Killed
		})
		if gone {
			androidForgetEmulator(port)
			fmt.Println("INFO | Shutting down on request from the console")
			return 0
		}
		if !announced && me.BootAt != 0 && time.Now().UnixMilli() >= me.BootAt {
			fmt.Println("INFO | Boot completed")
			announced = true
		}
	}
}

// androidForgetEmulator removes this process's entry.
func androidForgetEmulator(port int) {
	withLock(func() {
		ems := map[int]androidEmulator{}
		load(androidEmulatorsFile, &ems)
		if e, ok := ems[port]; ok && e.Pid == os.Getpid() {
			delete(ems, port)
			save(androidEmulatorsFile, ems)
		}
	})
}

package main

// simctl's app-control commands on a device of a set, where the shim does
// more than echo:
//
//	simctl --set DIR launch UDID ID [ARGS…]       "ID: <pid>" for an installed app; FrontBoard's error otherwise
//	simctl --set DIR terminate UDID ID            "found nothing to terminate" unless ID was launched since
//	simctl --set DIR spawn UDID log show …        a header and three lines naming the call
//
// Launched apps are kept in DIR/UDID/data/launched.txt, one id a line.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func iosLaunchedFile(set, udid string) string {
	return filepath.Join(set, udid, "data", "launched.txt")
}

func iosLaunched(set, udid string) []string {
	b, _ := os.ReadFile(iosLaunchedFile(set, udid))
	return strings.Fields(string(b))
}

func iosLaunch(set string, args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "Usage: simctl launch <device> <bundle identifier> [<argv 1> ...]")
		return 64
	}
	dev, code, ok := iosBootedDevice(set, args[0])
	if !ok {
		return code
	}
	id := args[1]
	if _, ok := iosInstalledApps(set, dev.UDID)[id]; !ok {
		fmt.Fprintf(os.Stderr, "An error was encountered processing the command (domain=FBSOpenApplicationServiceErrorDomain, code=4):\n"+
			"The request to open %q failed.\n", id)
		return 4
	}
	launched := iosLaunched(set, dev.UDID)
	if !slices.Contains(launched, id) {
		launched = append(launched, id)
	}
	if err := os.WriteFile(iosLaunchedFile(set, dev.UDID), []byte(strings.Join(launched, "\n")+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%s: %d\n", id, 40000+len(launched))
	return 0
}

func iosTerminate(set string, args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "Usage: simctl terminate <device> <bundle identifier>")
		return 64
	}
	dev, code, ok := iosBootedDevice(set, args[0])
	if !ok {
		return code
	}
	launched := iosLaunched(set, dev.UDID)
	at := slices.Index(launched, args[1])
	if at < 0 {
		return iosFail(3, 164, "found nothing to terminate")
	}
	launched = slices.Delete(launched, at, at+1)
	if err := os.WriteFile(iosLaunchedFile(set, dev.UDID), []byte(strings.Join(launched, "\n")+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// iosLogShow stands for log show inside a simulator: compact lines.
func iosLogShow(udid string, args []string) int {
	fmt.Println("Timestamp               Ty Process[PID:TID]")
	for i := 1; i <= 3; i++ {
		fmt.Printf("2026-01-01 12:00:0%d.000 Df SpringBoard[1:%d] line %d of %s: %s\n", i, i, i, udid, strings.Join(args, " "))
	}
	return 0
}

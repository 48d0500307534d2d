package main

// simctl's app and screen commands, on a device of a set:
//
//	simctl --set DIR install UDID PATH.app           a booted device; copies the bundle
//	simctl --set DIR listapps UDID                   the installed apps by bundle id
//	simctl --set DIR get_app_container UDID ID [data|app]
//	simctl --set DIR io UDID screenshot [--type=png] FILE
//
// As CoreSimulator lays them out, an installed app's bundle is copied to
// DIR/UDID/data/Containers/Bundle/Application/<uuid>/<name>.app and its
// data container is DIR/UDID/data/Containers/Data/Application/<uuid>, so
// an erase (which empties DIR/UDID/data) uninstalls every app. The bundle
// id is read from the bundle's Info.plist (XML).

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// iosBootedDevice finds udid in set, which must be booted; ok is false
// after it has printed simctl's error (code holds the exit).
func iosBootedDevice(set, udid string) (dev iosDevice, code int, ok bool) {
	devs := iosDevices(set)
	i := iosFind(devs, udid)
	if i < 0 || set == "" {
		return iosDevice{}, iosInvalidDevice(udid), false
	}
	if devs[i].State != "Booted" {
		return iosDevice{}, iosFail(iosExitState, 405, "Unable to lookup in current state: "+devs[i].State), false
	}
	return devs[i], 0, true
}

// iosPlistBundleID reads CFBundleIdentifier from an XML Info.plist.
func iosPlistBundleID(b []byte) string {
	_, after, ok := strings.Cut(string(b), "<key>CFBundleIdentifier</key>")
	if !ok {
		return ""
	}
	_, after, ok = strings.Cut(after, "<string>")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(after, "</string>")
	return strings.TrimSpace(id)
}

// iosAppUUID is a fixed container name per bundle id and kind.
func iosAppUUID(kind, bundleID string) string {
	sum := sha256.Sum256([]byte(kind + "/" + bundleID))
	return fmt.Sprintf("%X-%X-%X-%X-%X", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
}

func iosInstallApp(set string, args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "Usage: simctl install <device> <path>")
		return 64
	}
	dev, code, ok := iosBootedDevice(set, args[0])
	if !ok {
		return code
	}
	src := args[1]
	plist, err := os.ReadFile(filepath.Join(src, "Info.plist"))
	id := iosPlistBundleID(plist)
	if err != nil || id == "" || !strings.HasSuffix(src, ".app") {
		return iosFail(1, 22, "Missing bundle ID.")
	}
	data := filepath.Join(set, dev.UDID, "data")
	dst := filepath.Join(data, "Containers", "Bundle", "Application", iosAppUUID("bundle", id), filepath.Base(src))
	os.RemoveAll(filepath.Dir(dst))
	if err := iosCopyTree(src, dst); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, sub := range []string{"Documents", "Library", "tmp"} {
		os.MkdirAll(filepath.Join(data, "Containers", "Data", "Application", iosAppUUID("data", id), sub), 0o755)
	}
	return 0
}

// iosCopyTree copies a directory, its symlinks as symlinks.
func iosCopyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, to)
		case info.IsDir():
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
}

// iosInstalledApps maps the bundle ids installed on a device to their
// bundles' paths.
func iosInstalledApps(set, udid string) map[string]string {
	out := map[string]string{}
	bundles, _ := filepath.Glob(filepath.Join(set, udid, "data", "Containers", "Bundle", "Application", "*", "*.app"))
	for _, b := range bundles {
		plist, err := os.ReadFile(filepath.Join(b, "Info.plist"))
		if id := iosPlistBundleID(plist); err == nil && id != "" {
			out[id] = b
		}
	}
	return out
}

func iosListApps(set string, args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "Usage: simctl listapps <device>")
		return 64
	}
	dev, code, ok := iosBootedDevice(set, args[0])
	if !ok {
		return code
	}
	apps := iosInstalledApps(set, dev.UDID)
	ids := make([]string, 0, len(apps))
	for id := range apps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	fmt.Println("{")
	for _, id := range ids {
		fmt.Printf("    %q =     {\n        ApplicationType = User;\n        Bundle = \"file://%s/\";\n        CFBundleIdentifier = %q;\n    };\n", id, apps[id], id)
	}
	fmt.Println("}")
	return 0
}

func iosGetAppContainer(set string, args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "Usage: simctl get_app_container <device> <app bundle identifier> [<container>]")
		return 64
	}
	devs := iosDevices(set)
	i := iosFind(devs, args[0])
	if i < 0 || set == "" {
		return iosInvalidDevice(args[0])
	}
	id, kind := args[1], "app"
	if len(args) > 2 {
		kind = args[2]
	}
	bundle, ok := iosInstalledApps(set, devs[i].UDID)[id]
	if !ok {
		fmt.Fprintf(os.Stderr, "An error was encountered processing the command (domain=NSPOSIXErrorDomain, code=2):\nFailed to get the %s container for %s\n", kind, id)
		return 2
	}
	switch kind {
	case "app":
		fmt.Println(bundle)
	case "data":
		fmt.Println(filepath.Join(set, devs[i].UDID, "data", "Containers", "Data", "Application", iosAppUUID("data", id)))
	default:
		fmt.Fprintf(os.Stderr, "Unknown container type %s\n", kind)
		return 64
	}
	return 0
}

func iosIO(set string, args []string) int {
	if len(args) < 3 || args[1] != "screenshot" {
		fmt.Println("simctl io " + strings.Join(args, " "))
		return 0
	}
	if _, code, ok := iosBootedDevice(set, args[0]); !ok {
		return code
	}
	file := args[len(args)-1]
	img := image.NewRGBA(image.Rect(0, 0, 6, 13))
	for y := range 13 {
		for x := range 6 {
			img.Set(x, y, color.RGBA{R: 0x0a, G: 0x84, B: 0xff, A: 0xff})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "Error creating the image: %v\n", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "Detected file type 'PNG' from extension")
	fmt.Fprintf(os.Stderr, "Wrote screenshot to: %s\n", file)
	return 0
}

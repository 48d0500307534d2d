package main

// adb's file commands, on a running emulator's guest:
//
//	adb push LOCAL REMOTE        REMOTE absolute; /system, /vendor and /proc are read-only
//	adb pull REMOTE LOCAL        a file pushed, or written by `adb shell echo`;
//	                             a directory of them, recursively; /dev/zero,
//	                             which has no end, until adb is stopped
//	adb exec-out screencap -p    a small PNG on stdout; 96 MiB of one when
//	                             the guest has a /system/bin/screencap of
//	                             its own (one a rooted tenant put there)
//
// Pushed files are kept, byte for byte, in the guest's user data beside the
// files adb shell writes, so a snapshot holds them and a snapshot load or a
// wipe takes them. adb install reads the package name from the APK's binary
// AndroidManifest.xml, as the real package manager does, or from the file's
// name when it is not an APK.

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf16"
)

func androidPush(e androidEmulator, args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "adb: usage: adb push LOCAL REMOTE")
		return 1
	}
	local, remote := args[0], args[1]
	b, err := os.ReadFile(local)
	if err != nil {
		fmt.Fprintf(os.Stderr, "adb: error: cannot stat '%s': No such file or directory\n", local)
		return 1
	}
	for _, ro := range []string{"/system/", "/vendor/", "/proc/"} {
		if strings.HasPrefix(remote, ro) || !strings.HasPrefix(remote, "/") {
			fmt.Fprintf(os.Stderr, "adb: error: failed to copy '%s' to '%s': remote couldn't create file: Read-only file system\n", local, remote)
			return 1
		}
	}
	withLock(func() {
		g := androidLoadGuest(e.AvdDir)
		if g.Blobs == nil {
			g.Blobs = map[string][]byte{}
		}
		g.Blobs[remote] = b
		delete(g.Files, remote)
		androidSaveGuest(e.AvdDir, g)
	})
	fmt.Printf("%s: 1 file pushed, 0 skipped. 12.3 MB/s (%d bytes in 0.001s)\n", local, len(b))
	return 0
}

func androidPull(e androidEmulator, args []string) int {
	if len(args) == 0 || len(args) > 2 {
		fmt.Fprintln(os.Stderr, "adb: usage: adb pull REMOTE [LOCAL]")
		return 1
	}
	// Without LOCAL, adb writes into its working directory.
	remote, local := args[0], filepath.Base(args[0])
	if len(args) == 2 {
		local = args[1]
	}
	if remote == "/dev/zero" {
		// adb pulls a character device as a file, reading until it
		// ends: this one never does.
		f, err := os.Create(local)
		if err != nil {
			fmt.Fprintf(os.Stderr, "adb: error: cannot create '%s': %v\n", local, err)
			return 1
		}
		zeros := make([]byte, 64<<10)
		for {
			if _, err := f.Write(zeros); err != nil {
				return 1
			}
		}
	}
	var b []byte
	found := false
	under := map[string][]byte{}
	withLock(func() {
		g := androidLoadGuest(e.AvdDir)
		if blob, ok := g.Blobs[remote]; ok {
			b, found = blob, true
		} else if text, ok := g.Files[remote]; ok {
			b, found = []byte(text), true
		}
		for p, blob := range g.Blobs {
			if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(remote, "/")+"/"); ok {
				under[rel] = blob
			}
		}
	})
	if !found && len(under) > 0 {
		// A directory: adb makes LOCAL one and pulls what it holds.
		for rel, blob := range under {
			p := filepath.Join(local, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				fmt.Fprintf(os.Stderr, "adb: error: cannot create '%s': %v\n", p, err)
				return 1
			}
			if err := os.WriteFile(p, blob, 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "adb: error: cannot create '%s': %v\n", p, err)
				return 1
			}
		}
		fmt.Printf("%s/: %d files pulled, 0 skipped.\n", remote, len(under))
		return 0
	}
	if !found {
		fmt.Fprintf(os.Stderr, "adb: error: failed to stat remote object '%s': No such file or directory\n", remote)
		return 1
	}
	if err := os.WriteFile(local, b, 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "adb: error: cannot create '%s': %v\n", local, err)
		return 1
	}
	fmt.Printf("%s: 1 file pulled, 0 skipped. 15.1 MB/s (%d bytes in 0.001s)\n", remote, len(b))
	return 0
}

func androidExecOut(e androidEmulator, args []string) int {
	if strings.Join(args, " ") != "screencap -p" {
		fmt.Println(strings.Join(args, " "))
		return 0
	}
	var replaced bool
	withLock(func() { _, replaced = androidLoadGuest(e.AvdDir).Files["/system/bin/screencap"] })
	if replaced {
		os.Stdout.Write([]byte("\x89PNG\r\n\x1a\n"))
		zeros := make([]byte, 1<<20)
		for range 96 {
			if _, err := os.Stdout.Write(zeros); err != nil {
				return 1
			}
		}
		return 0
	}
	img := image.NewRGBA(image.Rect(0, 0, 4, 8))
	for y := range 8 {
		for x := range 4 {
			img.Set(x, y, color.RGBA{R: 0x3d, G: 0xdc, B: 0x84, A: 0xff})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	os.Stdout.Write(buf.Bytes())
	return 0
}

// androidApkPackage is the package an APK's manifest names, or "" when the
// file is not a zip with a readable binary AndroidManifest.xml.
func androidApkPackage(apk string) string {
	zr, err := zip.OpenReader(apk)
	if err != nil {
		return ""
	}
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name != "AndroidManifest.xml" {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return ""
		}
		b, _ := io.ReadAll(io.LimitReader(rc, 4<<20))
		rc.Close()
		return androidManifestPackage(b)
	}
	return ""
}

// androidManifestPackage reads <manifest package="…"> from binary XML: the
// string pool, then the first start element's attributes.
func androidManifestPackage(b []byte) string {
	le := binary.LittleEndian
	if len(b) < 8 {
		return ""
	}
	var pool []string
	for off := int(le.Uint16(b[2:])); off+8 <= len(b); {
		typ, hdr, size := le.Uint16(b[off:]), int(le.Uint16(b[off+2:])), int(le.Uint32(b[off+4:]))
		if size < 8 || off+size > len(b) || hdr > size {
			return ""
		}
		c := b[off : off+size]
		switch typ {
		case 0x0001:
			if len(c) < 28 {
				return ""
			}
			count, utf8, start := int(le.Uint32(c[8:])), le.Uint32(c[16:])&(1<<8) != 0, int(le.Uint32(c[20:]))
			for i := 0; i < count && hdr+4*i+4 <= len(c); i++ {
				at := start + int(le.Uint32(c[hdr+4*i:]))
				if at+2 > len(c) {
					return ""
				}
				if utf8 {
					n := int(c[at+1])
					if at+2+n > len(c) {
						return ""
					}
					pool = append(pool, string(c[at+2:at+2+n]))
					continue
				}
				n := int(le.Uint16(c[at:]))
				if at+2+2*n > len(c) {
					return ""
				}
				u := make([]uint16, n)
				for k := range u {
					u[k] = le.Uint16(c[at+2+2*k:])
				}
				pool = append(pool, string(utf16.Decode(u)))
			}
		case 0x0102:
			ext := c[hdr:]
			if len(ext) < 20 {
				return ""
			}
			start, size, count := int(le.Uint16(ext[8:])), int(le.Uint16(ext[10:])), int(le.Uint16(ext[12:]))
			for i := range count {
				a := start + i*size
				if a+20 > len(ext) {
					return ""
				}
				name, raw := int(le.Uint32(ext[a+4:])), le.Uint32(ext[a+8:])
				if name < len(pool) && pool[name] == "package" && int(raw) < len(pool) {
					return pool[raw]
				}
			}
			return ""
		}
		off += size
	}
	return ""
}

// androidInstalledName is the package an install of apk adds.
func androidInstalledName(apk string) string {
	if pkg := androidApkPackage(apk); pkg != "" {
		return pkg
	}
	return strings.TrimSuffix(filepath.Base(apk), ".apk")
}

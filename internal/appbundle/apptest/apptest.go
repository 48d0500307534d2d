// Package apptest builds small apps for tests: an .apk whose binary
// AndroidManifest.xml names a package, an .ipa and a zipped .app whose
// Info.plist names a bundle id. They are what the platforms' installers and
// simlock's stand-in tools read, without the code a real app carries. It is
// not part of simlock itself.
package apptest

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"unicode/utf16"
)

// APK is an .apk whose manifest names pkg (its string pool in UTF-16, as
// aapt writes it; utf8 writes it in UTF-8, as aapt2 may).
func APK(pkg string) []byte { return apk(pkg, false) }

// APKUTF8 is APK with its manifest's strings in UTF-8.
func APKUTF8(pkg string) []byte { return apk(pkg, true) }

func apk(pkg string, utf8 bool) []byte {
	return zipOf(map[string][]byte{
		"AndroidManifest.xml": Manifest(pkg, utf8),
		"classes.dex":         []byte("dex\n035\x00"),
		"resources.arsc":      {0x02, 0x00, 0x0c, 0x00},
	}, nil)
}

// IPA is an .ipa holding Payload/<name>.app with an XML Info.plist naming
// bundleID and an executable.
func IPA(bundleID, name string) []byte {
	return zipOf(appFiles("Payload/"+name+".app/", bundleID), nil)
}

// AppZip is a zip holding <name>.app at its top, as `zip -r` of a
// simulator build makes.
func AppZip(bundleID, name string) []byte {
	return zipOf(appFiles(name+".app/", bundleID), nil)
}

// AppZipWithLink is AppZip with one more entry: a symlink at
// <name>.app/<link> pointing at target.
func AppZipWithLink(bundleID, name, link, target string) []byte {
	return zipOf(appFiles(name+".app/", bundleID), map[string]string{name + ".app/" + link: target})
}

func appFiles(dir, bundleID string) map[string][]byte {
	return map[string][]byte{
		dir + "Info.plist": Plist(bundleID),
		dir + "App":        []byte("#!/bin/sh\nexit 0\n"),
	}
}

// Plist is an XML Info.plist naming bundleID.
func Plist(bundleID string) []byte {
	return fmt.Appendf(nil, `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>CFBundleExecutable</key>
	<string>App</string>
	<key>CFBundleIdentifier</key>
	<string>%s</string>
	<key>UIDeviceFamily</key>
	<array><integer>1</integer></array>
</dict>
</plist>
`, bundleID)
}

// BinaryPlist is a binary (bplist00) Info.plist naming bundleID.
func BinaryPlist(bundleID string) []byte {
	var b bytes.Buffer
	b.WriteString("bplist00")
	var offsets []int
	ascii := func(s string) {
		offsets = append(offsets, b.Len())
		if len(s) < 15 {
			b.WriteByte(0x50 | byte(len(s)))
		} else {
			b.WriteByte(0x5f)
			b.WriteByte(0x10)
			b.WriteByte(byte(len(s)))
		}
		b.WriteString(s)
	}
	utf16be := func(s string) {
		offsets = append(offsets, b.Len())
		u := utf16.Encode([]rune(s))
		b.WriteByte(0x6f)
		b.WriteByte(0x10)
		b.WriteByte(byte(len(u)))
		for _, c := range u {
			_ = binary.Write(&b, binary.BigEndian, c)
		}
	}
	// Object 0 is the dict: keys 1, 2; values 3, 4.
	offsets = append(offsets, b.Len())
	b.Write([]byte{0xD2, 1, 2, 3, 4})
	ascii("CFBundleExecutable")
	ascii("CFBundleIdentifier")
	ascii("App")
	utf16be(bundleID)
	table := b.Len()
	for _, o := range offsets {
		_ = binary.Write(&b, binary.BigEndian, uint16(o))
	}
	trailer := make([]byte, 32)
	trailer[6], trailer[7] = 2, 1
	binary.BigEndian.PutUint64(trailer[8:], uint64(len(offsets)))
	binary.BigEndian.PutUint64(trailer[16:], 0)
	binary.BigEndian.PutUint64(trailer[24:], uint64(table))
	b.Write(trailer)
	return b.Bytes()
}

// Manifest is a binary AndroidManifest.xml: a string pool and a <manifest
// package="pkg"> start element.
func Manifest(pkg string, utf8 bool) []byte {
	le := binary.LittleEndian
	strs := []string{"manifest", "package", pkg, "versionCode"}
	// The string pool.
	var data bytes.Buffer
	offs := make([]uint32, len(strs))
	for i, s := range strs {
		offs[i] = uint32(data.Len())
		if utf8 {
			n := len([]rune(s))
			data.WriteByte(byte(n))
			data.WriteByte(byte(len(s)))
			data.WriteString(s)
			data.WriteByte(0)
		} else {
			u := utf16.Encode([]rune(s))
			_ = binary.Write(&data, le, uint16(len(u)))
			for _, c := range u {
				_ = binary.Write(&data, le, c)
			}
			_ = binary.Write(&data, le, uint16(0))
		}
	}
	for data.Len()%4 != 0 {
		data.WriteByte(0)
	}
	const poolHdr = 28
	start := poolHdr + 4*len(strs)
	var pool bytes.Buffer
	flags := uint32(0)
	if utf8 {
		flags = 1 << 8
	}
	for _, v := range []any{uint16(0x0001), uint16(poolHdr), uint32(start + data.Len()), uint32(len(strs)), uint32(0), flags, uint32(start), uint32(0)} {
		_ = binary.Write(&pool, le, v)
	}
	for _, o := range offs {
		_ = binary.Write(&pool, le, o)
	}
	pool.Write(data.Bytes())
	// The start element: header, line, comment, then ns, name,
	// attributeStart, attributeSize, attributeCount, id, class, style and
	// two attributes (versionCode as an int, package as a string).
	var el bytes.Buffer
	const elHdr = 16
	attrs := 2
	size := elHdr + 20 + 20*attrs
	for _, v := range []any{uint16(0x0102), uint16(elHdr), uint32(size), uint32(1), uint32(0xFFFFFFFF),
		uint32(0xFFFFFFFF), uint32(0), uint16(20), uint16(20), uint16(attrs), uint16(0), uint16(0), uint16(0),
		// versionCode = 1 (TYPE_INT_DEC)
		uint32(0xFFFFFFFF), uint32(3), uint32(0xFFFFFFFF), uint16(8), uint8(0), uint8(0x10), uint32(1),
		// package = pkg (raw value and TYPE_STRING)
		uint32(0xFFFFFFFF), uint32(1), uint32(2), uint16(8), uint8(0), uint8(0x03), uint32(2)} {
		_ = binary.Write(&el, le, v)
	}
	var out bytes.Buffer
	_ = binary.Write(&out, le, uint16(0x0003))
	_ = binary.Write(&out, le, uint16(8))
	_ = binary.Write(&out, le, uint32(8+pool.Len()+el.Len()))
	out.Write(pool.Bytes())
	out.Write(el.Bytes())
	return out.Bytes()
}

// Zip is a zip of files (name to content), in name order.
func Zip(files map[string][]byte) []byte { return zipOf(files, nil) }

func zipOf(files map[string][]byte, links map[string]string) []byte {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		h := &zip.FileHeader{Name: n, Method: zip.Deflate}
		h.SetMode(0o644)
		if strings.HasSuffix(n, "/App") {
			h.SetMode(0o755)
		}
		f, _ := w.CreateHeader(h)
		_, _ = f.Write(files[n])
	}
	for n, target := range links {
		h := &zip.FileHeader{Name: n, Method: zip.Store}
		h.SetMode(0o777 | os.ModeSymlink)
		f, _ := w.CreateHeader(h)
		_, _ = f.Write([]byte(target))
	}
	_ = w.Close()
	return b.Bytes()
}

package appbundle

import (
	"bytes"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
)

// The chunk types of Android's binary XML (ResourceTypes.h) this reader
// needs.
const (
	axmlFile         = 0x0003
	axmlStringPool   = 0x0001
	axmlStartElement = 0x0102
	axmlUTF8Flag     = 1 << 8
	axmlTypeString   = 0x03
	axmlNoIndex      = 0xFFFFFFFF
	// maxStrings bounds the string pool.
	maxStrings = 1 << 20
)

var errManifest = errors.New("not a binary AndroidManifest.xml")

// androidPackage reads the package attribute of the first element (the
// <manifest>) of a binary AndroidManifest.xml.
func androidPackage(b []byte) (string, error) {
	le := binary.LittleEndian
	if len(b) < 8 || le.Uint16(b) != axmlFile {
		return "", errManifest
	}
	var pool []string
	off := int(le.Uint16(b[2:]))
	for off+8 <= len(b) {
		typ, hdr, size := le.Uint16(b[off:]), int(le.Uint16(b[off+2:])), int(le.Uint32(b[off+4:]))
		if size < 8 || hdr < 8 || hdr > size || off+size > len(b) {
			return "", errManifest
		}
		chunk := b[off : off+size]
		switch typ {
		case axmlStringPool:
			p, err := stringPool(chunk)
			if err != nil {
				return "", err
			}
			pool = p
		case axmlStartElement:
			return manifestPackage(chunk, hdr, pool)
		}
		off += size
	}
	return "", errManifest
}

// stringPool decodes a string pool chunk.
func stringPool(c []byte) ([]string, error) {
	le := binary.LittleEndian
	if len(c) < 28 {
		return nil, errManifest
	}
	count, flags, start := int(le.Uint32(c[8:])), le.Uint32(c[16:]), int(le.Uint32(c[20:]))
	hdr := int(le.Uint16(c[2:]))
	if count > maxStrings || hdr+4*count > len(c) || start > len(c) {
		return nil, errManifest
	}
	out := make([]string, count)
	for i := range count {
		at := start + int(le.Uint32(c[hdr+4*i:]))
		if at < start || at >= len(c) {
			return nil, errManifest
		}
		var s string
		var ok bool
		if flags&axmlUTF8Flag != 0 {
			s, ok = utf8String(c[at:])
		} else {
			s, ok = utf16String(c[at:])
		}
		if !ok {
			return nil, errManifest
		}
		out[i] = s
	}
	return out, nil
}

// utf8String reads a pool string in UTF-8: its UTF-16 length, its byte
// length (each one or two bytes), then the bytes.
func utf8String(b []byte) (string, bool) {
	_, b, ok := poolLen8(b)
	if !ok {
		return "", false
	}
	n, b, ok := poolLen8(b)
	if !ok || n > len(b) {
		return "", false
	}
	return string(b[:n]), true
}

func poolLen8(b []byte) (int, []byte, bool) {
	if len(b) < 1 {
		return 0, nil, false
	}
	if b[0]&0x80 == 0 {
		return int(b[0]), b[1:], true
	}
	if len(b) < 2 {
		return 0, nil, false
	}
	return int(b[0]&0x7f)<<8 | int(b[1]), b[2:], true
}

// utf16String reads a pool string in UTF-16: its length in units (one or
// two units), then the units.
func utf16String(b []byte) (string, bool) {
	le := binary.LittleEndian
	if len(b) < 2 {
		return "", false
	}
	n, skip := int(le.Uint16(b)), 2
	if n&0x8000 != 0 {
		if len(b) < 4 {
			return "", false
		}
		n, skip = (n&0x7fff)<<16|int(le.Uint16(b[2:])), 4
	}
	b = b[skip:]
	if n > len(b)/2 {
		return "", false
	}
	units := make([]uint16, n)
	for i := range units {
		units[i] = le.Uint16(b[2*i:])
	}
	return string(utf16.Decode(units)), true
}

// manifestPackage reads the package attribute of a start element chunk,
// which must be <manifest>.
func manifestPackage(c []byte, hdr int, pool []string) (string, error) {
	le := binary.LittleEndian
	str := func(i uint32) (string, bool) {
		if i == axmlNoIndex || int64(i) >= int64(len(pool)) {
			return "", false
		}
		return pool[i], true
	}
	if hdr+20 > len(c) {
		return "", errManifest
	}
	ext := c[hdr:]
	if name, _ := str(le.Uint32(ext[4:])); name != "manifest" {
		return "", fmt.Errorf("%w: the first element is not <manifest>", errManifest)
	}
	attrStart, attrSize, attrCount := int(le.Uint16(ext[8:])), int(le.Uint16(ext[10:])), int(le.Uint16(ext[12:]))
	if attrSize < 20 {
		return "", errManifest
	}
	for i := range attrCount {
		at := attrStart + i*attrSize
		if at+20 > len(ext) {
			return "", errManifest
		}
		a := ext[at:]
		if name, _ := str(le.Uint32(a[4:])); name != "package" {
			continue
		}
		if v, ok := str(le.Uint32(a[8:])); ok {
			return v, nil
		}
		if a[15] == axmlTypeString {
			if v, ok := str(le.Uint32(a[16:])); ok {
				return v, nil
			}
		}
		return "", fmt.Errorf("%w: package is not a string", errManifest)
	}
	return "", fmt.Errorf("%w: <manifest> has no package", errManifest)
}

var errPlist = errors.New("not a property list with a CFBundleIdentifier")

// bundleID reads CFBundleIdentifier from an Info.plist, binary or XML.
func bundleID(b []byte) (string, error) {
	if bytes.HasPrefix(b, []byte("bplist00")) {
		return binaryPlistString(b, "CFBundleIdentifier")
	}
	return xmlPlistString(b, "CFBundleIdentifier")
}

// xmlPlistString reads the string value of key in an XML plist's top
// dictionary.
func xmlPlistString(b []byte, key string) (string, error) {
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = false
	depth, dictDepth := 0, -1
	var text strings.Builder
	lastKey, wantValue := "", false
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", errPlist
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			text.Reset()
			if t.Name.Local == "dict" && dictDepth < 0 {
				dictDepth = depth
			}
			wantValue = wantValue && depth == dictDepth+1
		case xml.CharData:
			if text.Len() < maxManifest {
				text.Write(t)
			}
		case xml.EndElement:
			if depth == dictDepth+1 {
				switch t.Name.Local {
				case "key":
					lastKey, wantValue = text.String(), true
				case "string":
					if wantValue && lastKey == key {
						return strings.TrimSpace(text.String()), nil
					}
					wantValue = false
				default:
					wantValue = false
				}
			}
			if depth == dictDepth {
				return "", errPlist
			}
			depth--
		}
	}
}

// binaryPlistString reads the string value of key in a binary plist's top
// dictionary (bplist00: objects, an offset table and a 32-byte trailer).
func binaryPlistString(b []byte, key string) (string, error) {
	be := binary.BigEndian
	if len(b) < 8+32 {
		return "", errPlist
	}
	tr := b[len(b)-32:]
	offSize, refSize := int(tr[6]), int(tr[7])
	numObjects, top, tableAt := be.Uint64(tr[8:]), be.Uint64(tr[16:]), be.Uint64(tr[24:])
	if offSize < 1 || offSize > 8 || refSize < 1 || refSize > 8 || numObjects > uint64(len(b)) || top >= numObjects ||
		tableAt > uint64(len(b)) || uint64(offSize)*numObjects > uint64(len(b))-tableAt {
		return "", errPlist
	}
	beUint := func(p []byte) uint64 {
		var v uint64
		for _, c := range p {
			v = v<<8 | uint64(c)
		}
		return v
	}
	offset := func(obj uint64) (int, bool) {
		if obj >= numObjects {
			return 0, false
		}
		at := tableAt + obj*uint64(offSize)
		o := beUint(b[at : at+uint64(offSize)])
		return int(o), o < uint64(len(b))-32
	}
	// count reads an object's count: its low nibble, or an int object
	// after the marker when the nibble is 0xF.
	count := func(at int) (n, body int, ok bool) {
		n, body = int(b[at]&0x0f), at+1
		if n != 0x0f {
			return n, body, true
		}
		if body >= len(b) || b[body]>>4 != 0x1 {
			return 0, 0, false
		}
		w := 1 << (b[body] & 0x0f)
		if w > 8 || body+1+w > len(b) {
			return 0, 0, false
		}
		v := beUint(b[body+1 : body+1+w])
		if v > uint64(len(b)) {
			return 0, 0, false
		}
		return int(v), body + 1 + w, true
	}
	str := func(obj uint64) (string, bool) {
		at, ok := offset(obj)
		if !ok {
			return "", false
		}
		n, body, ok := count(at)
		if !ok {
			return "", false
		}
		switch b[at] >> 4 {
		case 0x5: // ASCII
			if body+n > len(b) {
				return "", false
			}
			return string(b[body : body+n]), true
		case 0x6: // UTF-16BE
			if n > (len(b)-body)/2 {
				return "", false
			}
			units := make([]uint16, n)
			for i := range units {
				units[i] = be.Uint16(b[body+2*i:])
			}
			return string(utf16.Decode(units)), true
		}
		return "", false
	}
	at, ok := offset(top)
	if !ok || b[at]>>4 != 0xD {
		return "", errPlist
	}
	n, body, ok := count(at)
	if !ok || n > (len(b)-body)/(2*refSize) {
		return "", errPlist
	}
	for i := range n {
		k, ok := str(beUint(b[body+i*refSize : body+(i+1)*refSize]))
		if !ok || k != key {
			continue
		}
		v, ok := str(beUint(b[body+(n+i)*refSize : body+(n+i+1)*refSize]))
		if !ok {
			return "", errPlist
		}
		return v, nil
	}
	return "", errPlist
}

package contract

import (
	"strings"
	"testing"
)

func TestCheckDevicePath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/sdcard/Download/a.txt", true},
		{"/data/local/tmp/x", true},
		{"/Media/DCIM/100APPLE/IMG 0001.JPG", true},
		{"@com.example.app/Documents/seed.json", true},
		{"@com.example-app.2/Library/Caches/x", true},
		{"/a", true},
		{"/" + strings.Repeat("a", MaxDevicePathLen-1), true},
		{"", false},
		{"/", false},
		{"relative/path", false},
		{"../x", false},
		{"/sdcard/../etc/passwd", false},
		{"/sdcard/./x", false},
		{"/sdcard//x", false},
		{"/sdcard/x/", false},
		{"/sdcard/x/..", false},
		{"/sdcard/\x00x", false},
		{"/sdcard/x\ny", false},
		{"@com.example.app", false},
		{"@com.example.app/", false},
		{"@/Documents/x", false},
		{"@.hidden/Documents/x", false},
		{"@com/../x", false},
		{"@com.example app/Documents/x", false},
		{"@com.example.app/../../x", false},
		{"/" + strings.Repeat("a", MaxDevicePathLen), false},
	} {
		err := CheckDevicePath("path", tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("CheckDevicePath(%q) = %v, want ok %v", tc.path, err, tc.ok)
		}
		if err != nil && (AsError(err).Code != CodeBadRequest || AsError(err).Details["field"] != "path") {
			t.Errorf("CheckDevicePath(%q) = %v, want BAD_REQUEST naming path", tc.path, err)
		}
	}
}

func TestSplitAppPath(t *testing.T) {
	if b, in, ok := SplitAppPath("@com.example.app/Documents/x.json"); !ok || b != "com.example.app" || in != "Documents/x.json" {
		t.Errorf("SplitAppPath = %q %q %v", b, in, ok)
	}
	if _, _, ok := SplitAppPath("/sdcard/x"); ok {
		t.Error("an absolute path split as an app's")
	}
}

// FuzzCheckDevicePath: a path CheckDevicePath accepts never climbs, never
// holds a control character, and is absolute or an app container's.
func FuzzCheckDevicePath(f *testing.F) {
	for _, s := range []string{"/sdcard/x", "@a.b/c", "/a/../b", "@a/..", "/a//b", "/\x00", "@/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if CheckDevicePath("path", p) != nil {
			return
		}
		rest := strings.TrimPrefix(p, "/")
		if _, in, ok := SplitAppPath(p); ok {
			rest = in
		} else if !strings.HasPrefix(p, "/") {
			t.Fatalf("%q accepted though neither absolute nor an app's", p)
		}
		for _, seg := range strings.Split(rest, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("%q accepted with segment %q", p, seg)
			}
		}
		for _, r := range p {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("%q accepted with a control character", p)
			}
		}
	})
}

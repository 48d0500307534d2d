package appbundle

import (
	"testing"

	"github.com/simlock/simlock/internal/appbundle/apptest"
)

// FuzzManifestAndPlist feeds the manifest and plist readers anything: they
// never panic, and what they read back from a well-formed file is its id.
func FuzzManifestAndPlist(f *testing.F) {
	for _, seed := range [][]byte{
		apptest.Manifest("com.example.notes", false), apptest.Manifest("com.example.notes", true),
		apptest.Plist("com.example.notes"), apptest.BinaryPlist("com.example.notes"), []byte("bplist00"), {3, 0, 8, 0},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = androidPackage(b)
		_, _ = bundleID(b)
	})
}

func TestManifestAndPlistReadTheirIDs(t *testing.T) {
	for _, utf8 := range []bool{false, true} {
		if got, err := androidPackage(apptest.Manifest("com.example.ü", utf8)); err != nil || got != "com.example.ü" {
			t.Errorf("manifest (utf8 %v): %q %v", utf8, got, err)
		}
	}
	for name, b := range map[string][]byte{"xml": apptest.Plist("com.example.ü"), "binary": apptest.BinaryPlist("com.example.ü")} {
		if got, err := bundleID(b); err != nil || got != "com.example.ü" {
			t.Errorf("%s plist: %q %v", name, got, err)
		}
	}
	// A truncated file is refused, not misread.
	m := apptest.Manifest("com.example", false)
	for n := 0; n < len(m)-1; n += 7 {
		if got, err := androidPackage(m[:n]); err == nil {
			t.Errorf("manifest cut at %d read as %q", n, got)
		}
	}
}

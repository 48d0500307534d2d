package appbundle_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/appbundle"
	"github.com/simlock/simlock/internal/appbundle/apptest"
	"github.com/simlock/simlock/internal/contract"
)

func TestInspectTellsAppsApartByContent(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
		kind contract.AppKind
		id   string
		app  string
	}{
		{"apk", apptest.APK("com.example.notes"), contract.AppAPK, "com.example.notes", ""},
		{"apk with a UTF-8 pool", apptest.APKUTF8("org.sample.app"), contract.AppAPK, "org.sample.app", ""},
		{"ipa", apptest.IPA("com.example.Todo", "Todo"), contract.AppIPA, "com.example.Todo", "Todo.app"},
		{"zipped app", apptest.AppZip("com.example.Maps", "Maps"), contract.AppZip, "com.example.Maps", "Maps.app"},
		{"zipped app with a binary plist", apptest.Zip(map[string][]byte{"B.app/Info.plist": apptest.BinaryPlist("com.example.bin"), "B.app/B": []byte("x")}),
			contract.AppZip, "com.example.bin", "B.app"},
		{"apk whose manifest is unreadable", apptest.Zip(map[string][]byte{"AndroidManifest.xml": []byte("<manifest package='x'/>")}), contract.AppAPK, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app, err := appbundle.InspectReader(bytes.NewReader(tc.body), int64(len(tc.body)))
			if err != nil {
				t.Fatalf("InspectReader: %v", err)
			}
			if app.Kind != tc.kind || app.ID != tc.id || app.Name != tc.app {
				t.Errorf("got kind %q id %q name %q, want %q %q %q", app.Kind, app.ID, app.Name, tc.kind, tc.id, tc.app)
			}
		})
	}
}

func TestInspectRefusesWhatIsNotAnApp(t *testing.T) {
	for name, body := range map[string][]byte{
		"empty":             {},
		"text":              []byte("hello, this is not an app"),
		"a png":             {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0},
		"a zip of files":    apptest.Zip(map[string][]byte{"readme.txt": []byte("hi")}),
		"two apps":          apptest.Zip(map[string][]byte{"A.app/Info.plist": apptest.Plist("a"), "B.app/Info.plist": apptest.Plist("b")}),
		"an app too deep":   apptest.Zip(map[string][]byte{"x/y/A.app/Info.plist": apptest.Plist("a")}),
		"a plist not a dir": apptest.Zip(map[string][]byte{"Info.plist": apptest.Plist("a")}),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := appbundle.InspectReader(bytes.NewReader(body), int64(len(body)))
			var inv *appbundle.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("got %v, want an *InvalidError", err)
			}
		})
	}
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "upload")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExtractAppUnpacksTheBundleOnly(t *testing.T) {
	for name, body := range map[string][]byte{
		"ipa": apptest.IPA("com.example.Todo", "Todo"),
		"app": apptest.AppZip("com.example.Todo", "Todo"),
	} {
		t.Run(name, func(t *testing.T) {
			zipPath := writeTemp(t, body)
			app, err := appbundle.Inspect(zipPath)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			got, err := appbundle.ExtractApp(zipPath, app, dir, 1<<20)
			if err != nil {
				t.Fatalf("ExtractApp: %v", err)
			}
			if got != filepath.Join(dir, "Todo.app") {
				t.Errorf("bundle at %s, want %s", got, filepath.Join(dir, "Todo.app"))
			}
			b, err := os.ReadFile(filepath.Join(got, "Info.plist"))
			if err != nil || !bytes.Contains(b, []byte("com.example.Todo")) {
				t.Errorf("Info.plist: %q %v", b, err)
			}
			st, err := os.Stat(filepath.Join(got, "App"))
			if err != nil || st.Mode().Perm()&0o100 == 0 {
				t.Errorf("the executable lost its mode: %v %v", st, err)
			}
		})
	}
}

func TestExtractAppRefusesLinksAndNamesThatLeaveTheBundle(t *testing.T) {
	for name, body := range map[string][]byte{
		"absolute link":  apptest.AppZipWithLink("a", "A", "secret", "/etc/passwd"),
		"climbing link":  apptest.AppZipWithLink("a", "A", "sub/secret", "../../x"),
		"climbing name":  apptest.Zip(map[string][]byte{"A.app/Info.plist": apptest.Plist("a"), "A.app/../../evil": []byte("x")}),
		"backslash name": apptest.Zip(map[string][]byte{"A.app/Info.plist": apptest.Plist("a"), `A.app/..\evil`: []byte("x")}),
	} {
		t.Run(name, func(t *testing.T) {
			zipPath := writeTemp(t, body)
			app, err := appbundle.Inspect(zipPath)
			if err != nil {
				t.Fatal(err)
			}
			parent := t.TempDir()
			dir := filepath.Join(parent, "stage")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			_, err = appbundle.ExtractApp(zipPath, app, dir, 1<<20)
			var inv *appbundle.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("got %v, want an *InvalidError", err)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 1 {
				t.Errorf("something was written beside the staging dir: %v", entries)
			}
		})
	}
	t.Run("a link that descends is kept", func(t *testing.T) {
		zipPath := writeTemp(t, apptest.AppZipWithLink("a", "A", "Current", "Versions/A"))
		app, _ := appbundle.Inspect(zipPath)
		got, err := appbundle.ExtractApp(zipPath, app, t.TempDir(), 1<<20)
		if err != nil {
			t.Fatalf("ExtractApp: %v", err)
		}
		if l, err := os.Readlink(filepath.Join(got, "Current")); err != nil || l != "Versions/A" {
			t.Errorf("link: %q %v", l, err)
		}
	})
}

func TestExtractAppStopsAtTheLimit(t *testing.T) {
	big := bytes.Repeat([]byte("a"), 4096)
	zipPath := writeTemp(t, apptest.Zip(map[string][]byte{"A.app/Info.plist": apptest.Plist("a"), "A.app/big": big}))
	app, _ := appbundle.Inspect(zipPath)
	_, err := appbundle.ExtractApp(zipPath, app, t.TempDir(), 1024)
	if !appbundle.ErrTooLarge(err) {
		t.Fatalf("got %v, want the limit's error", err)
	}
}

// FuzzInspect feeds Inspect anything: it never panics, and a refusal is an
// *InvalidError.
func FuzzInspect(f *testing.F) {
	for _, seed := range [][]byte{
		apptest.APK("com.example"), apptest.APKUTF8("a.b"), apptest.IPA("x.y", "X"), apptest.AppZip("x", "Y"),
		apptest.Zip(map[string][]byte{"B.app/Info.plist": apptest.BinaryPlist("com.example.bin")}),
		apptest.Zip(map[string][]byte{"AndroidManifest.xml": apptest.Manifest("p", false)[:40]}), {}, []byte("PK\x03\x04"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := appbundle.InspectReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			var inv *appbundle.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("an untyped refusal: %v", err)
			}
		}
	})
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r *bytes.Reader
	n int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}

// bareDirectory is a zip whose central directory holds n entries of
// nothing: the smallest an entry can be (46 bytes), the most memory per
// byte a zip reader spends on it (about 256 bytes each).
func bareDirectory(n int) []byte {
	var b bytes.Buffer
	for range n {
		var h [46]byte
		binary.LittleEndian.PutUint32(h[0:], 0x02014b50)
		b.Write(h[:])
	}
	dirLen := b.Len()
	var end [22]byte
	binary.LittleEndian.PutUint32(end[0:], 0x06054b50)
	binary.LittleEndian.PutUint16(end[8:], uint16(n))
	binary.LittleEndian.PutUint16(end[10:], uint16(n))
	binary.LittleEndian.PutUint32(end[12:], uint32(dirLen))
	b.Write(end[:])
	return b.Bytes()
}

// An archive whose directory claims more entries than any app holds is
// refused before it is read whole: a 2 GiB upload of bare entries would
// otherwise take some 12 GB of the daemon's memory to list.
func TestInspectReadsABoundedDirectory(t *testing.T) {
	body := bareDirectory(800_000) // 37 MB of directory
	r := &countingReader{r: bytes.NewReader(body)}
	_, err := appbundle.InspectReader(r, int64(len(body)))
	var inv *appbundle.InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("got %v, want an *InvalidError", err)
	}
	if r.n > 20<<20 {
		t.Errorf("Inspect read %d bytes of a %d-byte directory before refusing it; want at most 20 MiB", r.n, len(body))
	}
}

// entry is one entry of an archive a test lays out in order.
type entry struct {
	name, body string
	link       bool
}

func zipInOrder(entries ...entry) []byte {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Store}
		h.SetMode(0o644)
		if e.link {
			h.SetMode(0o777 | os.ModeSymlink)
		}
		f, _ := w.CreateHeader(h)
		_, _ = f.Write([]byte(e.body))
	}
	_ = w.Close()
	return b.Bytes()
}

// An archive whose entries cannot all be laid out (a name twice, a file
// where a directory must be, a link that loops, a name the file system
// takes no such) is the uploader's to fix: INVALID_APP, never INTERNAL.
func TestExtractAppRefusesALayoutThatCannotBeUnpacked(t *testing.T) {
	plist := entry{name: "A.app/Info.plist", body: string(apptest.Plist("a"))}
	for name, body := range map[string][]byte{
		"a name twice":          zipInOrder(plist, entry{name: "A.app/x", body: "1"}, entry{name: "A.app/x", body: "2"}),
		"a file as a directory": zipInOrder(plist, entry{name: "A.app/x", body: "1"}, entry{name: "A.app/x/y", body: "2"}),
		"a link that loops":     zipInOrder(plist, entry{name: "A.app/l", body: "l", link: true}, entry{name: "A.app/l/f", body: "2"}),
		"a NUL in a name":       zipInOrder(plist, entry{name: "A.app/a\x00b", body: "1"}),
		"a name too long":       zipInOrder(plist, entry{name: "A.app/" + strings.Repeat("n", 300), body: "1"}),
	} {
		t.Run(name, func(t *testing.T) {
			zipPath := writeTemp(t, body)
			app, err := appbundle.Inspect(zipPath)
			if err != nil {
				t.Fatal(err)
			}
			_, err = appbundle.ExtractApp(zipPath, app, t.TempDir(), 1<<20)
			var inv *appbundle.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("got %v, want an *InvalidError", err)
			}
		})
	}
}

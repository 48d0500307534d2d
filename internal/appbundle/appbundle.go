// Package appbundle tells what an uploaded app is, by its content rather
// than its name: an Android .apk (a zip with a binary AndroidManifest.xml),
// an iOS .ipa (a zip with Payload/<name>.app/Info.plist), or a zipped iOS
// .app (a zip with <name>.app/Info.plist at its top). It reads the app's id
// when the app says it (the manifest's package, the bundle's
// CFBundleIdentifier from an XML or binary property list), and unpacks the
// .app bundle of an .ipa or a zipped .app into a directory, confined to it.
//
// Everything here reads untrusted bytes: every length is checked against
// what is there, every loop is bounded by the input, listing an archive
// reads a bounded part of it (so its memory is bounded whatever the
// upload's size), and nothing it writes leaves the directory it was given. The functions are pure but for the
// files they are told to read or write, and safe for concurrent use.
package appbundle

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/simlock/simlock/internal/contract"
)

// App is what an app upload is.
type App struct {
	Kind contract.AppKind
	// ID is the package name (apk) or bundle id (ipa, app); "" when the
	// app does not say it in a form this package reads.
	ID string
	// Name is the .app bundle's directory name (ipa, app).
	Name string
	// bundle is the .app's directory inside the zip, with its trailing
	// slash ("Payload/X.app/", "X.app/").
	bundle string
}

// InvalidError is an upload that is not an app of a kind this package
// knows.
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return "not an app: " + e.Reason }

// Limits on what is read from an archive's metadata.
const (
	// maxEntries bounds the entries of an archive.
	maxEntries = 200000
	// maxDirectory bounds the bytes of an archive's central directory read
	// to list its entries. Listing holds every entry in memory, some 250
	// bytes each however short its record (46 bytes at least), so it is
	// this bound, not the upload's size, that bounds that memory: under
	// 100 MB for a directory of bare records, where a 2 GiB upload of them
	// would take 12 GB. 16 MiB lists about 100,000 entries with the names
	// an app's files have.
	maxDirectory = 16 << 20
	// maxManifest bounds the manifest or Info.plist read into memory.
	maxManifest = 4 << 20
)

// errDirectoryTooLarge ends the listing of an archive past maxDirectory.
var errDirectoryTooLarge = errors.New("appbundle: the archive's directory is larger than its bound")

// openZip lists the entries of the zip of size bytes in r, reading at most
// maxDirectory bytes to do it (archive/zip reads every record there is
// before a count could be checked), and refuses more than maxEntries.
func openZip(r io.ReaderAt, size int64) (*zip.Reader, error) {
	br := &boundedReaderAt{r: r, left: maxDirectory}
	zr, err := zip.NewReader(br, size)
	switch {
	case errors.Is(err, errDirectoryTooLarge):
		return nil, &InvalidError{Reason: fmt.Sprintf("the archive's directory is larger than %d MiB, more entries than an app holds", maxDirectory>>20)}
	case err != nil:
		return nil, &InvalidError{Reason: "it is not a zip archive; an app is an .apk, an .ipa or a zipped .app"}
	}
	// The entries' contents are read through br too, without a bound of
	// its own: each entry's copy has its own.
	br.left = -1
	if len(zr.File) > maxEntries {
		return nil, &InvalidError{Reason: fmt.Sprintf("the archive has %d entries, more than %d", len(zr.File), maxEntries)}
	}
	return zr, nil
}

// boundedReaderAt reads at most left bytes of r in all, then fails with
// errDirectoryTooLarge; a negative left is no bound. It is used from one
// goroutine at a time.
type boundedReaderAt struct {
	r    io.ReaderAt
	left int64
}

func (b *boundedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if b.left < 0 {
		return b.r.ReadAt(p, off)
	}
	if b.left == 0 {
		return 0, errDirectoryTooLarge
	}
	short := int64(len(p)) > b.left
	if short {
		p = p[:b.left]
	}
	n, err := b.r.ReadAt(p, off)
	b.left -= int64(n)
	if err == nil && short {
		err = errDirectoryTooLarge
	}
	return n, err
}

// Inspect says what app the file at p is.
func Inspect(p string) (App, error) {
	f, err := os.Open(p)
	if err != nil {
		return App{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return App{}, err
	}
	return InspectReader(f, st.Size())
}

// InspectReader says what app the size bytes of r are.
func InspectReader(r io.ReaderAt, size int64) (App, error) {
	zr, err := openZip(r, size)
	if err != nil {
		return App{}, err
	}
	byName := make(map[string]*zip.File, len(zr.File))
	var bundles []string
	for _, f := range zr.File {
		byName[f.Name] = f
		dir, file := path.Split(f.Name)
		if file != "Info.plist" || !strings.HasSuffix(dir, ".app/") {
			continue
		}
		parent := path.Dir(strings.TrimSuffix(dir, "/"))
		if parent == "." || parent == "Payload" {
			bundles = append(bundles, dir)
		}
	}
	if m, ok := byName["AndroidManifest.xml"]; ok {
		app := App{Kind: contract.AppAPK}
		if b, err := readEntry(m); err == nil {
			app.ID, _ = androidPackage(b)
		}
		return app, nil
	}
	switch len(bundles) {
	case 0:
		return App{}, &InvalidError{Reason: "the zip holds no AndroidManifest.xml (an .apk), no Payload/<name>.app/Info.plist (an .ipa) and no <name>.app/Info.plist (a zipped .app)"}
	case 1:
	default:
		sort.Strings(bundles)
		return App{}, &InvalidError{Reason: fmt.Sprintf("the zip holds %d .app bundles (%s); install one at a time", len(bundles), strings.Join(bundles, ", "))}
	}
	dir := bundles[0]
	app := App{Kind: contract.AppZip, Name: path.Base(dir), bundle: dir}
	if strings.HasPrefix(dir, "Payload/") {
		app.Kind = contract.AppIPA
	}
	if b, err := readEntry(byName[dir+"Info.plist"]); err == nil {
		app.ID, _ = bundleID(b)
	}
	return app, nil
}

// readEntry reads one small entry whole.
func readEntry(f *zip.File) ([]byte, error) {
	if f.UncompressedSize64 > maxManifest {
		return nil, fmt.Errorf("%s is larger than %d bytes", f.Name, maxManifest)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, maxManifest))
}

// ExtractApp unpacks the .app bundle of app (an ipa or a zipped app, as
// Inspect found it in the zip at zipPath) into dir, which must exist, and
// returns the bundle's path. It writes only inside dir (through os.Root),
// refuses entry names that would leave the bundle, symlinks whose target
// leaves it, and more than limit bytes in all. Entries outside the bundle
// are skipped. What the archive is to blame for is an *InvalidError.
func ExtractApp(zipPath string, app App, dir string, limit int64) (string, error) {
	if app.bundle == "" {
		return "", fmt.Errorf("appbundle: %s app has no bundle to extract", app.Kind)
	}
	zf, err := os.Open(zipPath)
	if err != nil {
		return "", err
	}
	defer zf.Close()
	st, err := zf.Stat()
	if err != nil {
		return "", err
	}
	zr, err := openZip(zf, st.Size())
	if err != nil {
		return "", err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	name := app.Name
	if err := root.Mkdir(name, 0o755); err != nil {
		return "", err
	}
	left := limit
	for _, f := range zr.File {
		rel, ok := strings.CutPrefix(f.Name, app.bundle)
		if !ok || rel == "" {
			continue
		}
		if err := checkEntryName(rel); err != nil {
			return "", err
		}
		target := path.Join(name, rel)
		switch mode := f.Mode(); {
		case mode.IsDir() || strings.HasSuffix(rel, "/"):
			if err := root.MkdirAll(target, 0o755); err != nil {
				return "", unpackError(f.Name, err)
			}
		case mode&os.ModeSymlink != 0:
			link, err := readEntry(f)
			if err != nil {
				return "", err
			}
			if err := checkLink(rel, string(link)); err != nil {
				return "", err
			}
			if err := root.MkdirAll(path.Dir(target), 0o755); err != nil {
				return "", unpackError(f.Name, err)
			}
			if err := root.Symlink(string(link), target); err != nil {
				return "", unpackError(f.Name, err)
			}
		case mode.IsRegular():
			if err := root.MkdirAll(path.Dir(target), 0o755); err != nil {
				return "", unpackError(f.Name, err)
			}
			n, err := writeEntry(root, target, f, mode.Perm()&0o755|0o600, left)
			if err != nil {
				return "", err
			}
			left -= n
		default:
			return "", &InvalidError{Reason: fmt.Sprintf("%s is neither a file, a directory nor a symlink", clip(f.Name))}
		}
	}
	return path.Join(dir, name), nil
}

// errTooLarge is an archive that unpacks to more than its limit.
var errTooLarge = errors.New("appbundle: the app unpacks to more than the upload limit")

// ErrTooLarge reports whether err is an archive over its limit.
func ErrTooLarge(err error) bool { return errors.Is(err, errTooLarge) }

// writeEntry copies one file entry to target under root, at most left
// bytes.
func writeEntry(root *os.Root, target string, f *zip.File, perm os.FileMode, left int64) (int64, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, &InvalidError{Reason: fmt.Sprintf("%s: %v", clip(f.Name), err)}
	}
	defer rc.Close()
	out, err := root.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, unpackError(f.Name, err)
	}
	n, err := io.Copy(out, io.LimitReader(rc, left+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, unpackError(f.Name, err)
	}
	if n > left {
		return n, errTooLarge
	}
	return n, nil
}

// unpackError is the error of laying out the archive's entry name: the
// archive's own fault (a name twice, a file where a directory must be, a
// link that loops, a name the file system refuses, bytes that do not
// decompress) is an *InvalidError; the machine's (out of space or file
// descriptors, an I/O error) is returned as it is.
func unpackError(name string, err error) error {
	for _, machine := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EROFS} {
		if errors.Is(err, machine) {
			return err
		}
	}
	return &InvalidError{Reason: fmt.Sprintf("%s cannot be unpacked: %v", clip(name), err)}
}

// checkEntryName refuses a name inside the bundle that is absolute, has a
// backslash, or has an empty, "." or ".." segment (a trailing slash aside).
func checkEntryName(rel string) error {
	if strings.HasPrefix(rel, "/") || strings.Contains(rel, `\`) {
		return &InvalidError{Reason: fmt.Sprintf("entry %q is not a relative path", clip(rel))}
	}
	segs := strings.Split(strings.TrimSuffix(rel, "/"), "/")
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return &InvalidError{Reason: fmt.Sprintf("entry %q leaves its bundle", clip(rel))}
		}
	}
	return nil
}

// checkLink refuses a symlink whose target is absolute or climbs (has a
// ".." segment): the platform's installer follows links, and one that left
// the bundle would copy a file of the host into the device. A target that
// only descends from its own directory stays inside the bundle however links
// chain, since every link it passes through descends too.
func checkLink(rel, target string) error {
	if target == "" || strings.HasPrefix(target, "/") || strings.Contains(target, `\`) || strings.ContainsRune(target, 0) {
		return &InvalidError{Reason: fmt.Sprintf("symlink %q points outside its bundle", clip(rel))}
	}
	for _, seg := range strings.Split(target, "/") {
		if seg == ".." {
			return &InvalidError{Reason: fmt.Sprintf("symlink %q points outside its bundle", clip(rel))}
		}
	}
	return nil
}

// clip shortens a path quoted back in a refusal: a bundle's paths are
// longer than most values, so it quotes up to 96 bytes.
func clip(s string) string { return contract.ClipTo(s, 96) }

package ios

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/simlock/simlock/internal/appbundle"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

var _ driver.Files = (*Driver)(nil)

// Files. simctl has no file transfer of its own, so the driver reaches a
// simulator's files on the host, where CoreSimulator keeps them: a device
// path "/a/b" is <root>/<UDID>/data/a/b, and "@<bundle id>/a/b" is a/b in
// the app's data container (which `simctl get_app_container … data` names,
// and which must lie inside that same data directory). Every open goes
// through an os.Root at the data directory (an app's container is opened
// through it too), so neither ".." nor a symlink a tenant planted (through
// the app, or an earlier push), the container itself included, leads
// outside it; such a path is refused. The device's erasable provenance mark,
// <data>/simlock-mark.json, is refused too. Apps are installed with
// `simctl install` from a bundle unpacked in the daemon's scratch
// directory, and screenshots taken with `simctl io … screenshot` into the
// daemon's staging file: simctl is only ever given paths the daemon owns.
// A file is opened without waiting (O_NONBLOCK), and only a regular one is
// read or written: a FIFO an app made would otherwise hold the open until
// someone wrote to it.
const (
	opFiles = "files"
	// installTimeout bounds simctl install: a large app is copied whole.
	installTimeout = 10 * time.Minute
)

// pngSignature starts every PNG.
var pngSignature = []byte("\x89PNG\r\n\x1a\n")

// dataDir is a device's data directory on the host.
func (d *Driver) dataDir(udid string) string { return filepath.Join(d.root, udid, "data") }

// openDeviceRoot opens the directory a device path lives in, with the path
// inside it: the device's data directory, or an app's data container in
// it.
func (d *Driver) openDeviceRoot(ctx context.Context, dev driver.Device, p string) (*os.Root, string, error) {
	udid, err := udidOf(opFiles, dev)
	if err != nil {
		return nil, "", err
	}
	if err := d.RevalidateRoot(); err != nil {
		return nil, "", &driver.CrashError{Op: opFiles, Err: err}
	}
	data := d.dataDir(udid)
	inside := strings.TrimPrefix(p, "/")
	bundle, rest, inApp := contract.SplitAppPath(p)
	var rel string
	if inApp {
		out, err := d.simctl(ctx, opFiles, commandTimeout, nil, "get_app_container", udid, bundle, "data")
		if err != nil {
			return nil, "", &driver.PathRefusedError{Path: p, Reason: "no app " + bundle + " with a data container is installed on the device"}
		}
		container := strings.TrimSpace(string(out))
		rel, err = filepath.Rel(data, container)
		if err != nil || !filepath.IsAbs(container) || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, "", &driver.PathRefusedError{Path: p, Reason: "the app's container is not inside the device's data directory"}
		}
		inside = rest
	} else if inside == markFile {
		return nil, "", &driver.PathRefusedError{Path: p, Reason: "it is simlock's own provenance mark"}
	}
	root, err := os.OpenRoot(data)
	if err != nil {
		return nil, "", crash(opFiles, "open the device's directory: %w", err)
	}
	if !inApp {
		return root, inside, nil
	}
	// Through the data directory's root, so a container that is a link
	// (an app may replace its own) leads nowhere outside it.
	defer root.Close()
	app, err := root.OpenRoot(rel)
	if err != nil {
		return nil, "", refused(p, err, false)
	}
	return app, inside, nil
}

// refused is the error of a failed open or create of device path p in the
// device's tree: missing (when missingOK), else refused, with the reason
// the file system gave (outside the tree through a symlink, a directory, no
// permission).
func refused(p string, err error, missingOK bool) error {
	if missingOK && errors.Is(err, os.ErrNotExist) {
		return &driver.FileMissingError{Path: p}
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &driver.PathRefusedError{Path: p, Reason: err.Error()}
}

// PushFile copies the staged src to path in the device's tree.
func (d *Driver) PushFile(ctx context.Context, dev driver.Device, src, p string) error {
	root, inside, err := d.openDeviceRoot(ctx, dev, p)
	if err != nil {
		return err
	}
	defer root.Close()
	if dir := path.Dir(inside); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return refused(p, err, false)
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return crash(opFiles, "open the staged file: %w", err)
	}
	defer in.Close()
	out, err := root.OpenFile(inside, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return refused(p, err, false)
	}
	if err := regular(p, out); err != nil {
		out.Close()
		return err
	}
	_, err = io.Copy(out, contextReader{ctx, in})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return crash(opFiles, "write %s: %w", p, err)
	}
	return nil
}

// regular refuses an opened device file that is not a regular file.
func regular(p string, f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return crash(opFiles, "stat %s: %w", p, err)
	}
	switch {
	case st.IsDir():
		return &driver.PathRefusedError{Path: p, Reason: "it is a directory, not a file"}
	case !st.Mode().IsRegular():
		return &driver.PathRefusedError{Path: p, Reason: "it is not a regular file (" + st.Mode().Type().String() + ")"}
	}
	return nil
}

// PullFile copies path in the device's tree to dst, at most max bytes of
// it: a file that is, or grows, larger is refused and dst deleted.
func (d *Driver) PullFile(ctx context.Context, dev driver.Device, p, dst string, max int64) error {
	root, inside, err := d.openDeviceRoot(ctx, dev, p)
	if err != nil {
		return err
	}
	defer root.Close()
	in, err := root.OpenFile(inside, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return refused(p, err, true)
	}
	defer in.Close()
	if err := regular(p, in); err != nil {
		return err
	}
	if st, err := in.Stat(); err == nil && st.Size() > max {
		return &driver.FileTooLargeError{Path: p, Max: max}
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return crash(opFiles, "create the staging file: %w", err)
	}
	n, err := io.Copy(out, io.LimitReader(contextReader{ctx, in}, max+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		_ = os.Remove(dst)
		return crash(opFiles, "read %s: %w", p, err)
	case n > max:
		_ = os.Remove(dst)
		return &driver.FileTooLargeError{Path: p, Max: max}
	}
	return nil
}

// contextReader ends a copy when ctx does (the lease's end).
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// InstallApp unpacks the .app of an .ipa or a zipped .app into the scratch
// directory and runs simctl install with it.
func (d *Driver) InstallApp(ctx context.Context, dev driver.Device, up driver.AppUpload) (contract.InstalledApp, error) {
	if up.Kind != contract.AppIPA && up.Kind != contract.AppZip {
		return contract.InstalledApp{}, &driver.InstallFailedError{Detail: fmt.Sprintf("an %s is not an iOS app", up.Kind)}
	}
	udid, err := udidOf(opFiles, dev)
	if err != nil {
		return contract.InstalledApp{}, err
	}
	bundle, err := appbundle.ExtractApp(up.Path, up.App, up.Scratch, up.MaxBytes)
	switch {
	case appbundle.ErrTooLarge(err):
		return contract.InstalledApp{}, contract.Errorf(contract.CodeBodyTooLarge, "the app unpacks to more than exec.maxUploadBytes (%d)", up.MaxBytes).
			With("maxBytes", up.MaxBytes)
	case errors.As(err, new(*appbundle.InvalidError)):
		return contract.InstalledApp{}, contract.Errorf(contract.CodeInvalidApp, "%v", err)
	case err != nil:
		return contract.InstalledApp{}, crash(opFiles, "unpack the app: %w", err)
	}
	if _, err := d.simctl(ctx, opFiles, installTimeout, nil, "install", udid, bundle); err != nil {
		var ce *CallError
		if errors.As(err, &ce) && ce.Err == nil {
			return contract.InstalledApp{}, &driver.InstallFailedError{Detail: ce.Stderr}
		}
		return contract.InstalledApp{}, err
	}
	return contract.InstalledApp{Kind: up.Kind, ID: up.ID, Name: up.Name}, nil
}

// Screenshot runs simctl io <udid> screenshot into dst.
func (d *Driver) Screenshot(ctx context.Context, dev driver.Device, dst string) error {
	udid, err := udidOf(opFiles, dev)
	if err != nil {
		return err
	}
	if _, err := d.simctl(ctx, opFiles, commandTimeout, nil, "io", udid, "screenshot", "--type=png", dst); err != nil {
		return err
	}
	f, err := os.Open(dst)
	if err != nil {
		return crash(opFiles, "simctl io screenshot left no file: %w", err)
	}
	defer f.Close()
	head := make([]byte, len(pngSignature))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, pngSignature) {
		return crash(opFiles, "simctl io screenshot did not write a PNG")
	}
	return nil
}

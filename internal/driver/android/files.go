package android

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

var _ driver.Files = (*Driver)(nil)

// Files: every call reaches one emulator, the one running the device's AVD
// (its console names the AVD's directory, as at boot), through the private
// server (-P) and by serial (-s); never a shell: a device path is one
// argument of adb push or pull, so nothing in it is read by a shell.
const (
	opFiles = "files"
	// transferTimeout bounds one push, pull or install: a large file over
	// adb takes minutes; the lease's end cancels sooner.
	transferTimeout = 30 * time.Minute
)

// pngSignature starts every PNG.
var pngSignature = []byte("\x89PNG\r\n\x1a\n")

// serialFor is the serial of the emulator that runs dev now.
func (d *Driver) serialFor(ctx context.Context, dev driver.Device) (string, error) {
	r, err := d.findRunning(ctx, opFiles, dev.ID)
	if err != nil {
		return "", err
	}
	if r == nil {
		return "", crashf(opFiles, "device %s is not running", dev.ID)
	}
	return serialOf(r.port), nil
}

// checkPath refuses the paths Android's model does not serve: an iOS app
// container path, and simlock's own mark in the guest.
func checkPath(p string) error {
	if _, _, ok := contract.SplitAppPath(p); ok {
		return &driver.PathRefusedError{Path: p, Reason: "Android paths are absolute; @<bundle id>/… is an iOS app's container"}
	}
	if p == erasableMarkPath {
		return &driver.PathRefusedError{Path: p, Reason: "it is simlock's own provenance mark"}
	}
	return nil
}

// PushFile runs adb push of the staged src to path.
func (d *Driver) PushFile(ctx context.Context, dev driver.Device, src, path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	serial, err := d.serialFor(ctx, dev)
	if err != nil {
		return err
	}
	res, err := d.serialAdb(ctx, opFiles, transferTimeout, serial, "push", src, path)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		// The guest refused the path (read-only, no permission): the
		// caller's to fix.
		return &driver.PathRefusedError{Path: path, Reason: "the device refused it: " + outputOf(res)}
	}
	return nil
}

// PullFile runs adb pull of path to dst. A path that names a directory is
// refused: a pull is of one file.
func (d *Driver) PullFile(ctx context.Context, dev driver.Device, path, dst string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	serial, err := d.serialFor(ctx, dev)
	if err != nil {
		return err
	}
	res, err := d.serialAdb(ctx, opFiles, transferTimeout, serial, "pull", path, dst)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		out := outputOf(res)
		if strings.Contains(out, "No such file or directory") || strings.Contains(out, "does not exist") {
			return &driver.FileMissingError{Path: path}
		}
		return &driver.PathRefusedError{Path: path, Reason: "the device refused it: " + out}
	}
	st, err := os.Lstat(dst)
	if err != nil {
		return crash(opFiles, fmt.Errorf("adb pull left no file: %w", err))
	}
	if !st.Mode().IsRegular() {
		_ = os.RemoveAll(dst)
		return &driver.PathRefusedError{Path: path, Reason: "it is a directory, not a file"}
	}
	return nil
}

// InstallApp runs adb install -r of the staged .apk, named *.apk in the
// scratch directory, as adb wants.
func (d *Driver) InstallApp(ctx context.Context, dev driver.Device, up driver.AppUpload) (contract.InstalledApp, error) {
	if up.Kind != contract.AppAPK {
		return contract.InstalledApp{}, &driver.InstallFailedError{Detail: fmt.Sprintf("an %s is not an Android app", up.Kind)}
	}
	serial, err := d.serialFor(ctx, dev)
	if err != nil {
		return contract.InstalledApp{}, err
	}
	apk := filepath.Join(up.Scratch, "app.apk")
	if err := os.Link(up.Path, apk); err != nil {
		return contract.InstalledApp{}, crash(opFiles, err)
	}
	res, err := d.serialAdb(ctx, opFiles, transferTimeout, serial, "install", "-r", apk)
	if err != nil {
		return contract.InstalledApp{}, err
	}
	if res.ExitCode != 0 || !bytes.Contains(res.Stdout, []byte("Success")) {
		return contract.InstalledApp{}, &driver.InstallFailedError{Detail: outputOf(res)}
	}
	return contract.InstalledApp{Kind: contract.AppAPK, ID: up.ID}, nil
}

// Screenshot runs adb exec-out screencap -p, whose output is the PNG.
func (d *Driver) Screenshot(ctx context.Context, dev driver.Device, dst string) error {
	serial, err := d.serialFor(ctx, dev)
	if err != nil {
		return err
	}
	res, err := d.serialAdb(ctx, opFiles, callTimeout, serial, "exec-out", "screencap", "-p")
	if err := succeeded(res, err, opFiles, "adb exec-out screencap"); err != nil {
		return err
	}
	if !bytes.HasPrefix(res.Stdout, pngSignature) {
		return crashf(opFiles, "screencap did not answer a PNG: %q", lastLines(string(res.Stdout[:min(len(res.Stdout), 200)])))
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return crash(opFiles, err)
	}
	_, err = f.Write(res.Stdout)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return crash(opFiles, err)
	}
	return nil
}

package android

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/runner"
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
	// pullWatch is how often a pull's file is measured while adb writes
	// it: adb pull copies whatever the path is (a character device such as
	// /dev/zero without end, a directory whole), so it is stopped once
	// what it wrote passes the bound, by about what it writes in this long.
	pullWatch = 50 * time.Millisecond
	// maxScreenshot bounds a screenshot's PNG: a real screen's is a few
	// MiB, and more is no screenshot (a screencap a rooted tenant put in
	// place could write without end), so the call is cut there.
	maxScreenshot = 64 << 20
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

// PullFile runs adb pull of path to dst, stopped once dst is larger than
// max or a directory: a pull is of one file, of at most max bytes.
func (d *Driver) PullFile(ctx context.Context, dev driver.Device, path, dst string, max int64) error {
	if err := checkPath(path); err != nil {
		return err
	}
	serial, err := d.serialFor(ctx, dev)
	if err != nil {
		return err
	}
	res, refused, err := d.pullWatched(ctx, serial, path, dst, max)
	if refused != nil {
		_ = os.RemoveAll(dst)
		return refused
	}
	if err != nil {
		_ = os.RemoveAll(dst)
		return err
	}
	if res.ExitCode != 0 {
		_ = os.RemoveAll(dst)
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
	if err := pulledWithin(path, st, max); err != nil {
		_ = os.RemoveAll(dst)
		return err
	}
	return nil
}

// pullWatched runs adb pull of path to dst, measuring dst every pullWatch
// meanwhile: once it breaks pulledWithin, adb is stopped and refused says
// why.
func (d *Driver) pullWatched(ctx context.Context, serial, path, dst string, max int64) (res runner.Result, refused, err error) {
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(pullWatch)
		defer tick.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			if st, err := os.Lstat(dst); err == nil {
				if refused = pulledWithin(path, st, max); refused != nil {
					stop()
					return
				}
			}
		}
	}()
	res, err = d.serialAdb(pctx, opFiles, transferTimeout, serial, "pull", path, dst)
	stop()
	<-watched
	return res, refused, err
}

// pulledWithin refuses what a pull of path left (st) when it is not one
// file of at most max bytes.
func pulledWithin(path string, st os.FileInfo, max int64) error {
	switch {
	case st.IsDir():
		return &driver.PathRefusedError{Path: path, Reason: "it is a directory, not a file"}
	case !st.Mode().IsRegular():
		return &driver.PathRefusedError{Path: path, Reason: "it is not a regular file"}
	case st.Size() > max:
		return &driver.FileTooLargeError{Path: path, Max: max}
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

// Screenshot runs adb exec-out screencap -p, whose output is the PNG,
// streamed to dst and cut past maxScreenshot.
func (d *Driver) Screenshot(ctx context.Context, dev driver.Device, dst string) error {
	serial, err := d.serialFor(ctx, dev)
	if err != nil {
		return err
	}
	if err := d.superviseServer(ctx, opFiles); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return crash(opFiles, err)
	}
	err = d.screencap(ctx, serial, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = crash(opFiles, cerr)
	}
	if err == nil {
		err = isPNG(dst)
	}
	if err != nil {
		_ = os.Remove(dst)
		return err
	}
	return nil
}

// streamer is a runner that hands a program's output on as it comes
// (runner.OS).
type streamer interface {
	Stream(ctx context.Context, c runner.Cmd, stdout, stderr io.Writer) (exitCode int, err error)
}

// screencap writes the output of adb exec-out screencap -p to w, stopping
// it past maxScreenshot bytes; a runner that cannot stream has its output
// collected first.
func (d *Driver) screencap(ctx context.Context, serial string, w io.Writer) error {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	out := &cappedWriter{w: w, left: maxScreenshot, stop: stop}
	var stderr bytes.Buffer
	errs := &cappedWriter{w: &stderr, left: 64 << 10, drop: true}
	cmd := runner.Cmd{Path: d.sdk.adb, Args: d.adbArgs([]string{"-s", serial, "exec-out", "screencap", "-p"}), Env: d.adbEnv, Timeout: callTimeout}
	var code int
	var err error
	if s, ok := d.run.(streamer); ok {
		code, err = s.Stream(sctx, cmd, out, errs)
	} else {
		var res runner.Result
		res, err = d.run.Run(sctx, cmd)
		code = res.ExitCode
		_, _ = errs.Write(res.Stderr)
		if err == nil {
			_, _ = out.Write(res.Stdout)
		}
	}
	d.log.Debug("ran", "cmd", cmd.String(), "exit", code, "err", err)
	switch {
	case out.over:
		return crashf(opFiles, "adb exec-out screencap wrote more than %d MiB, which no screen's PNG is", maxScreenshot>>20)
	case err != nil:
		return crash(opFiles, err)
	case code != 0:
		return crashf(opFiles, "adb exec-out screencap exited with code %d: %s", code, lastLines(stderr.String()))
	}
	return nil
}

// cappedWriter passes at most left bytes on to w; past that it fails and
// calls stop, or, with drop, takes what comes and keeps none of it.
type cappedWriter struct {
	w    io.Writer
	left int64
	drop bool
	over bool
	stop func()
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		c.over = true
		if c.drop {
			return len(p), nil
		}
		if c.stop != nil {
			c.stop()
		}
		return 0, errors.New("output over its bound")
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}

// isPNG refuses a screenshot file that does not start as a PNG does.
func isPNG(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return crash(opFiles, err)
	}
	defer f.Close()
	head := make([]byte, len(pngSignature))
	n, _ := io.ReadFull(f, head)
	if !bytes.Equal(head[:n], pngSignature) || n < len(pngSignature) {
		return crashf(opFiles, "screencap did not answer a PNG: %q", head[:n])
	}
	return nil
}

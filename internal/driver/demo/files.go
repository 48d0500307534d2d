package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

var _ driver.Files = (*Driver)(nil)

// Simulated files: a running device keeps what is pushed to it in memory,
// by device path, and the apps installed on it; its clean wipes both, as a
// real device's erase or snapshot restore does. They are not in the state
// file: a daemon's restart finds them gone, as if the device had been
// cleaned.
const (
	opFiles = "files"
	// maxDeviceBytes caps what one simulated device keeps, in all.
	maxDeviceBytes = 64 << 20
	// markPath is where the real drivers keep the erasable provenance
	// mark inside the device, on each platform (the demo keeps its marks
	// in its record, but refuses the same paths).
	markPathAndroid = "/data/local/tmp/simlock-mark.json"
	markPathIOS     = "/simlock-mark.json"
)

// running is dev's record when it runs, or why it cannot be used. d.mu must
// be held.
func (d *Driver) runningLocked(dev driver.Device) (*device, error) {
	rec, ok := d.devices[dev.ID]
	if !ok {
		return nil, d.absentLocked(opFiles, dev.ID, "")
	}
	d.upLocked(rec)
	if rec.state != stateBooted {
		return nil, crash(opFiles, fmt.Errorf("demo: device %s is not running", dev.ID))
	}
	return rec, nil
}

// checkPathLocked refuses what the platform's model does not serve: an app
// container path on Android, a container of an app that is not installed,
// and simlock's own mark. d.mu must be held.
func (d *Driver) checkPathLocked(rec *device, p string) error {
	if bundle, _, ok := contract.SplitAppPath(p); ok {
		if d.platform == contract.PlatformAndroid {
			return &driver.PathRefusedError{Path: p, Reason: "Android paths are absolute; @<bundle id>/… is an iOS app's container"}
		}
		if _, ok := rec.apps[bundle]; !ok {
			return &driver.PathRefusedError{Path: p, Reason: "no app " + bundle + " is installed on the device"}
		}
		return nil
	}
	if p == markPathAndroid && d.platform == contract.PlatformAndroid || p == markPathIOS && d.platform == contract.PlatformIOS {
		return &driver.PathRefusedError{Path: p, Reason: "it is simlock's own provenance mark"}
	}
	return nil
}

// PushFile keeps src's bytes at path on the device.
func (d *Driver) PushFile(ctx context.Context, dev driver.Device, src, path string) error {
	b, err := readBounded(src)
	if err != nil {
		return crash(opFiles, err)
	}
	if err := ctx.Err(); err != nil {
		return crash(opFiles, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rec, err := d.runningLocked(dev)
	if err != nil {
		return err
	}
	if err := d.checkPathLocked(rec, path); err != nil {
		return err
	}
	total := int64(len(b))
	for p, f := range rec.files {
		if p != path {
			total += int64(len(f))
		}
	}
	if total > maxDeviceBytes {
		return contract.Errorf(contract.CodeBodyTooLarge, "a demo device keeps at most %d MiB of files", maxDeviceBytes>>20).With("maxBytes", maxDeviceBytes)
	}
	if rec.files == nil {
		rec.files = map[string][]byte{}
	}
	rec.files[path] = b
	return nil
}

// readBounded reads a staged file of at most maxDeviceBytes.
func readBounded(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDeviceBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDeviceBytes {
		return nil, contract.Errorf(contract.CodeBodyTooLarge, "a demo device keeps at most %d MiB of files", maxDeviceBytes>>20).With("maxBytes", maxDeviceBytes)
	}
	return b, nil
}

// PullFile writes what the device keeps at path to dst, when it is at most
// max bytes.
func (d *Driver) PullFile(ctx context.Context, dev driver.Device, path, dst string, max int64) error {
	d.mu.Lock()
	rec, err := d.runningLocked(dev)
	if err == nil {
		err = d.checkPathLocked(rec, path)
	}
	var b []byte
	var ok bool
	if err == nil {
		b, ok = rec.files[path]
	}
	d.mu.Unlock()
	switch {
	case err != nil:
		return err
	case !ok:
		return &driver.FileMissingError{Path: path}
	case int64(len(b)) > max:
		return &driver.FileTooLargeError{Path: path, Max: max}
	}
	return writeNew(dst, b)
}

// writeNew writes b to dst, which must not exist.
func writeNew(dst string, b []byte) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return crash(opFiles, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return crash(opFiles, err)
	}
	if err := f.Close(); err != nil {
		return crash(opFiles, err)
	}
	return nil
}

// InstallApp records the app on the device, under its id (or its bundle's
// name, for one that does not say its id).
func (d *Driver) InstallApp(ctx context.Context, dev driver.Device, up driver.AppUpload) (contract.InstalledApp, error) {
	if err := ctx.Err(); err != nil {
		return contract.InstalledApp{}, crash(opFiles, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rec, err := d.runningLocked(dev)
	if err != nil {
		return contract.InstalledApp{}, err
	}
	key := up.ID
	if key == "" {
		key = strings.TrimSuffix(up.Name, ".app")
	}
	if key == "" {
		return contract.InstalledApp{}, &driver.InstallFailedError{Detail: "the package does not name itself"}
	}
	if rec.apps == nil {
		rec.apps = map[string]contract.AppKind{}
	}
	rec.apps[key] = up.Kind
	return contract.InstalledApp{Kind: up.Kind, ID: up.ID, Name: up.Name}, nil
}

// Apps lists the apps installed on device id, for tests and people
// reading a demo.
func (d *Driver) Apps(id string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	if rec, ok := d.devices[id]; ok {
		for a := range rec.apps {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// Screenshot writes a small PNG in a colour of the device's own.
func (d *Driver) Screenshot(ctx context.Context, dev driver.Device, dst string) error {
	d.mu.Lock()
	rec, err := d.runningLocked(dev)
	var sc screen
	if err == nil {
		sc = d.screenLocked(dev.ID, rec)
	}
	d.mu.Unlock()
	if err != nil {
		return err
	}
	b, err := sc.png()
	if err != nil {
		return crash(opFiles, err)
	}
	return writeNew(dst, b)
}

// screenLocked is what the running device rec shows: its name (the model
// it was made as), its OS and id, and the appearance it was set to.
// d.mu must be held.
func (d *Driver) screenLocked(id string, rec *device) screen {
	name := rec.spec.Model
	if name == "" {
		name = "demo device"
	}
	sc := screen{id: id, lines: []string{name, string(d.platform) + " " + rec.spec.OSVersion, id}}
	if rec.tools != nil && rec.tools.appearance == contract.AppearanceDark {
		sc.dark = true
	}
	return sc
}

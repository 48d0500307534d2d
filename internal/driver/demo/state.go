package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/simlock/simlock/internal/contract"
)

// stateFormat is the version of the state file's layout. A file of another
// format is refused rather than guessed at.
const stateFormat = 1

// StatePath is the file a Driver of platform p keeps its world in when
// Options.StateFile is stateFile: "<stateFile>.<platform>.json". Each
// platform has a file of its own, so the two demo drivers of a daemon can be
// given the same StateFile and never write the same file: neither has to
// read, merge or lock the other's world.
func StatePath(stateFile string, p contract.Platform) string {
	return stateFile + "." + string(p) + ".json"
}

// worldFile is the layout of a state file.
type worldFile struct {
	Format int `json:"format"`
	// Platform is checked at load, so a file renamed to the other
	// platform's name is refused rather than served.
	Platform contract.Platform `json:"platform"`
	// Installs is the install count, so receipts stay unique across runs.
	Installs int `json:"installs"`
	// Runtimes maps every installed runtime, built-in ones included, to its
	// receipt. A built-in runtime missing from it was removed.
	Runtimes map[string]string     `json:"runtimes"`
	Devices  map[string]deviceFile `json:"devices,omitempty"`
}

type deviceFile struct {
	Model     string `json:"model,omitempty"`
	OSVersion string `json:"osVersion,omitempty"`
	// State is "created", "booting", "booted" or "shutdown".
	State string `json:"state"`
	// Port is the console port of a booting or booted Android device.
	Port         int `json:"port,omitempty"`
	BootFails    int `json:"bootFails,omitempty"`
	ReclaimFails int `json:"reclaimFails,omitempty"`
}

func (s devState) name() string {
	switch s {
	case stateCreated:
		return "created"
	case stateBooting:
		return "booting"
	case stateBooted:
		return "booted"
	case stateShutdown:
		return "shutdown"
	}
	return fmt.Sprintf("devState(%d)", int(s))
}

func parseDevState(name string) (devState, bool) {
	for _, s := range []devState{stateCreated, stateBooting, stateBooted, stateShutdown} {
		if s.name() == name {
			return s, true
		}
	}
	return 0, false
}

// stateFile is where a Driver records its world.
type stateFile struct {
	path string
	// mu serialises saves, so that a snapshot never overtakes a later one
	// on its way to disk. It is taken before Driver.mu, never after.
	mu sync.Mutex
	// written is what the file holds now, so that an operation that changed
	// nothing writes nothing. nil until the first write.
	written []byte
}

// save writes the world to the state file, if there is one and the world
// changed since the last write. It takes d.mu itself, so the caller must not
// hold it. The file is replaced by renaming a synced temporary file over it,
// so a reader, or a daemon killed at any moment, sees the old world or the
// new one, never a mix.
func (d *Driver) save() error {
	if d.file == nil {
		return nil
	}
	d.file.mu.Lock()
	defer d.file.mu.Unlock()
	d.mu.Lock()
	b, err := json.MarshalIndent(d.snapshotLocked(), "", "  ")
	d.mu.Unlock()
	if err != nil {
		return fmt.Errorf("demo: state file %s: %w", d.file.path, err)
	}
	b = append(b, '\n')
	if bytes.Equal(b, d.file.written) {
		return nil
	}
	if err := writeAtomically(d.file.path, b); err != nil {
		// written stays as it was, so the next save tries again.
		return fmt.Errorf("demo: state file %s: %w", d.file.path, err)
	}
	d.file.written = b
	return nil
}

// saved is err, or, when err is nil, the failure to record what op changed.
// The save is tried either way, since failed operations change things too:
// a failed boot gives its port back, a fault is used up.
func (d *Driver) saved(op string, err error) error {
	if serr := d.save(); serr != nil && err == nil {
		return crash(op, serr)
	}
	return err
}

// snapshotLocked needs d.mu held.
func (d *Driver) snapshotLocked() worldFile {
	w := worldFile{
		Format:   stateFormat,
		Platform: d.platform,
		Installs: d.installs,
		Runtimes: make(map[string]string, len(d.receipts)),
		Devices:  make(map[string]deviceFile, len(d.devices)),
	}
	maps.Copy(w.Runtimes, d.receipts)
	for id, rec := range d.devices {
		w.Devices[id] = deviceFile{
			Model:        rec.spec.Model,
			OSVersion:    rec.spec.OSVersion,
			State:        rec.state.name(),
			Port:         rec.port,
			BootFails:    rec.bootFails,
			ReclaimFails: rec.reclaimFails,
		}
	}
	return w
}

func writeAtomically(path string, b []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	// Chmod as well as CreateTemp's 0600, so the mode does not depend on
	// how CreateTemp happens to create files.
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(b)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	// The rename is durable only once the directory is synced. A failure
	// here is not reported: the file is complete and in place for any
	// process that reads it, and only a power cut could lose the rename.
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
	return nil
}

// load reads the world from d.file, if the file exists, into a driver that
// is not yet shared. It must run before Options.Installed is applied, which
// has the last word on runtimes.
func (d *Driver) load() error {
	b, err := os.ReadFile(d.file.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("demo: state file %s: %w", d.file.path, err)
	}
	var w worldFile
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("demo: state file %s is corrupt: %w", d.file.path, err)
	}
	if err := d.apply(w); err != nil {
		return fmt.Errorf("demo: state file %s is corrupt: %w", d.file.path, err)
	}
	return nil
}

// apply checks w whole before changing anything, then replaces the driver's
// runtimes and devices with w's, settling the devices (see settle).
func (d *Driver) apply(w worldFile) error {
	if w.Format != stateFormat {
		return fmt.Errorf("format %d, want %d", w.Format, stateFormat)
	}
	if w.Platform != d.platform {
		return fmt.Errorf("it holds the %q world, not %q", w.Platform, d.platform)
	}
	if w.Runtimes == nil {
		return errors.New("no runtimes")
	}
	if w.Installs < 0 {
		return fmt.Errorf("install count %d", w.Installs)
	}
	installs := w.Installs
	for v, receipt := range w.Runtimes {
		rv, stamp, err := d.parseInstalled(receipt)
		if err == nil && (stamp == "" || rv != v) {
			err = fmt.Errorf("%q is not a receipt of %s", receipt, v)
		}
		if err != nil {
			return fmt.Errorf("runtime %q: %w", v, err)
		}
		if n, err := strconv.Atoi(stamp); err == nil {
			installs = max(installs, n)
		}
	}
	devices := make(map[string]*device, len(w.Devices))
	for id, f := range w.Devices {
		state, ok := parseDevState(f.State)
		if id == "" || !ok || f.BootFails < 0 || f.ReclaimFails < 0 {
			return fmt.Errorf("device %q: %+v", id, f)
		}
		devices[id] = &device{
			spec:         deviceData{Model: f.Model, OSVersion: f.OSVersion},
			state:        state,
			port:         f.Port,
			bootFails:    f.BootFails,
			reclaimFails: f.ReclaimFails,
		}
	}

	for _, v := range slices.Clone(d.catalog.Runtimes) {
		if _, ok := w.Runtimes[v]; !ok {
			d.removeLocked(v)
		}
	}
	for v, receipt := range w.Runtimes {
		d.installLocked(v, receipt)
	}
	d.installs = installs
	d.devices = devices
	d.settle()
	return nil
}

// settle turns the devices just loaded into what a real machine would show
// after the daemon that drove them was killed. A simulator or emulator is a
// process of its own, so a booted device is still running and a stopped one
// still stopped. A boot, though, was driven by the dead daemon and never
// finished: a booting device is shut down and its port is free. Other
// operations record their effects when they end, so a device that was being
// reclaimed, shut down or destroyed is as it was before the operation. A
// boot-fail or reclaim-fail fault that the interrupted boot or reclaim had
// taken is used up, since that operation never succeeded; the others are
// still pending.
//
// A running Android emulator keeps its console port, unless the file gives
// it one that is not an emulator port or that another device already holds
// (the file was edited): then it takes the lowest free port, as an emulator
// started again would, or, with none free, is stopped. Devices are taken in
// id order, so the outcome does not depend on map order.
func (d *Driver) settle() {
	ids := slices.Sorted(maps.Keys(d.devices))
	var portless []string
	for _, id := range ids {
		rec := d.devices[id]
		if rec.state == stateBooting {
			rec.state = stateShutdown
		}
		port := rec.port
		rec.port = 0
		if rec.state != stateBooted || d.platform != contract.PlatformAndroid {
			continue
		}
		if _, taken := d.ports[port]; taken || port < firstPort || port > lastPort || port%2 != 0 {
			portless = append(portless, id)
			continue
		}
		rec.port = port
		d.ports[port] = id
	}
	for _, id := range portless {
		rec := d.devices[id]
		if port, ok := d.takePort(id); ok {
			rec.port = port
		} else {
			rec.state = stateShutdown
		}
	}
}

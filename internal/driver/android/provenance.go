package android

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/simlock/simlock/internal/driver"
)

var _ driver.ProvenanceReader = (*Driver)(nil)

const (
	// markKey is the config.ini key of the durable mark. Neither
	// avdmanager nor the emulator writes config.ini after the AVD is
	// created, and a wipe leaves it alone.
	markKey = "simlock.mark"
	// erasableMarkPath is the erasable mark inside the guest's user data,
	// which -wipe-data (or a factory reset) takes away. It can be read only
	// while the emulator runs.
	erasableMarkPath = "/data/local/tmp/simlock-mark.json"
	// unparseableMark stands for a mark simlock cannot read as its own: no
	// token equals it, so it counts as another token.
	unparseableMark = "(unparseable)"
)

// tokenPattern is what a mark token may look like. A token goes into a
// shell command on the device, so one from damaged driver data that could
// change that command is never used.
var tokenPattern = regexp.MustCompile(`^[0-9A-Za-z_-]{1,64}$`)

func (d *Driver) configIni(name string) string { return filepath.Join(d.avdDir(name), "config.ini") }

// tokenOf is the mark token dev's driver data records; "" for a device made
// before marks.
func tokenOf(dev driver.Device) string {
	var data deviceData
	_ = json.Unmarshal(dev.Data, &data) // no data, no token
	return data.MarkToken
}

// withToken is dev with token recorded in its driver data.
func withToken(dev driver.Device, token string) driver.Device {
	var data deviceData
	_ = json.Unmarshal(dev.Data, &data) // data from an older driver is rebuilt
	data.AvdName = dev.ID
	data.MarkToken = token
	if b, err := json.Marshal(data); err == nil {
		dev.Data = b
	}
	return dev
}

// readDurable returns the token of AVD name's durable mark; "" when its
// config.ini has none.
func (d *Driver) readDurable(name string) (string, error) {
	props, err := readProperties(d.configIni(name))
	if errNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return props[markKey], nil
}

// writeDurable sets the simlock.mark line of AVD name's config.ini,
// keeping every other line as it was, and replaces the file whole so that
// the emulator never reads half of it.
func (d *Driver) writeDurable(name, token string) error {
	path := d.configIni(name)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	var lines []string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if k, _, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == markKey {
			continue
		}
		if line != "" {
			lines = append(lines, line)
		}
	}
	if n := len(lines); n > 0 && !strings.HasSuffix(lines[n-1], "\n") {
		lines[n-1] += "\n"
	}
	lines = append(lines, markKey+"="+token+"\n")
	tmp := path + ".simlock-tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "")), fi.Mode().Perm()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// writeErasable writes the erasable mark on the running emulator at port.
func (d *Driver) writeErasable(ctx context.Context, op string, port int, token string) error {
	if !tokenPattern.MatchString(token) {
		return crashf(op, "refusing to write the provenance mark %q", token)
	}
	res, err := d.serialAdb(ctx, op, callTimeout, serialOf(port), "shell",
		fmt.Sprintf(`echo '{"token":"%s"}' > %s`, token, erasableMarkPath))
	return succeeded(res, err, op, "adb shell (write the provenance mark)")
}

// readErasable asks the emulator at serial, in one shell call, which AVD it
// runs and what its erasable mark holds. readable is false when it does
// not answer, or answers for another AVD than name: then nothing is known
// of the mark.
func (d *Driver) readErasable(ctx context.Context, op, serial, name string) (token string, readable bool) {
	if !serialPattern.MatchString(serial) {
		return "", false
	}
	res, err := d.serialAdb(ctx, op, pollCallTimeout, serial, "shell",
		"getprop ro.boot.qemu.avd_name; cat "+erasableMarkPath+" 2>/dev/null || true")
	if err != nil || res.ExitCode != 0 {
		return "", false
	}
	first, rest, _ := strings.Cut(strings.ReplaceAll(string(res.Stdout), "\r", ""), "\n")
	if strings.TrimSpace(first) != name {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return "", true
	}
	var m struct {
		Token string `json:"token"`
	}
	if json.Unmarshal([]byte(rest), &m) != nil {
		return unparseableMark, true
	}
	return m.Token, true
}

var serialPattern = regexp.MustCompile(`^emulator-\d+$`)

// Provenance reads the AVD's durable mark from its config.ini and, when
// dev.Address names the emulator it runs on, its erasable mark from the
// guest.
func (d *Driver) Provenance(ctx context.Context, dev driver.Device) (driver.Provenance, error) {
	const op = "provenance"
	present, err := d.lookupAVD(op, dev.ID)
	if err != nil {
		return driver.Provenance{}, err
	}
	if !present {
		return driver.Provenance{}, crashf(op, "AVD %s is not in the device root %s", dev.ID, d.root)
	}
	p := driver.Provenance{Token: tokenOf(dev)}
	if p.Durable, err = d.readDurable(dev.ID); err != nil {
		return driver.Provenance{}, crash(op, fmt.Errorf("read the provenance mark: %w", err))
	}
	if dev.Address != "" {
		p.Erasable, p.ErasableReadable = d.readErasable(ctx, op, dev.Address, dev.ID)
	}
	return p, nil
}

// checkDurable refuses a destructive op on a device whose durable mark is
// not the token its driver data records (see driver.CheckDurable).
func (d *Driver) checkDurable(op string, dev driver.Device) error {
	token := tokenOf(dev)
	if token == "" {
		return nil
	}
	durable, err := d.readDurable(dev.ID)
	if err != nil {
		return crash(op, fmt.Errorf("read the provenance mark: %w", err))
	}
	if err := driver.CheckDurable(dev.ID, token, durable); err != nil {
		return crash(op, err)
	}
	return nil
}

// cleanToken is the token to write the erasable mark with after simlock
// cleaned or booted the device: the one its driver data records, else the
// durable mark's; "" for a device that has neither yet.
func (d *Driver) cleanToken(dev driver.Device) string {
	if t := tokenOf(dev); t != "" {
		return t
	}
	if t, err := d.readDurable(dev.ID); err == nil && tokenPattern.MatchString(t) {
		return t
	}
	return ""
}

// adoptToken brings a device made before marks under them: it records the
// token of its durable mark or, for a device without one, writes a new one
// and records that; its next boot writes the erasable mark. A device whose
// driver data has a token is returned as it is. A failure is logged and
// leaves the device as it was, for the next boot to try again.
func (d *Driver) adoptToken(ctx context.Context, op string, dev driver.Device) driver.Device {
	if tokenOf(dev) != "" {
		return dev
	}
	if present, err := d.lookupAVD(op, dev.ID); err != nil || !present {
		return dev // the boot says why
	}
	token, err := d.readDurable(dev.ID)
	if err == nil && token == "" {
		token = driver.NewMarkToken()
		err = d.writeDurable(dev.ID, token)
	}
	if err != nil || !tokenPattern.MatchString(token) {
		if err != nil {
			d.log.WarnContext(ctx, "could not bring a device under provenance marks", "avd", dev.ID, "err", err)
		}
		return dev
	}
	return withToken(dev, token)
}

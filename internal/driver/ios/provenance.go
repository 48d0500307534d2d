package ios

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/simlock/simlock/internal/atomicfile"
	"github.com/simlock/simlock/internal/driver"
)

var _ driver.ProvenanceReader = (*Driver)(nil)

// markFile is the name of both provenance marks. The durable one sits in
// the device's directory, beside device.plist, which `simctl erase` keeps;
// the erasable one sits in its data directory, which the erase empties.
const markFile = "simlock-mark.json"

// unparseableMark stands for a mark file simlock cannot read as its own: no
// token equals it, so it counts as another token.
const unparseableMark = "(unparseable)"

// markRecord is a mark file's contents. Only the token is compared; the
// UDID and time are for a person looking at the file.
type markRecord struct {
	Token     string `json:"token"`
	UDID      string `json:"udid"`
	WrittenAt string `json:"writtenAt"`
}

func (d *Driver) durableMark(udid string) string { return filepath.Join(d.root, udid, markFile) }
func (d *Driver) erasableMark(udid string) string {
	return filepath.Join(d.root, udid, "data", markFile)
}

// readMark returns the token a mark file holds; "" when there is none.
func readMark(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var m markRecord
	if json.Unmarshal(b, &m) != nil {
		return unparseableMark, nil
	}
	return m.Token, nil
}

// writeMark replaces a mark file whole, so a reader never sees half of it.
func writeMark(path, udid, token string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(markRecord{Token: token, UDID: udid, WrittenAt: time.Now().UTC().Format(time.RFC3339)})
	return atomicfile.Write(path, b, 0o600)
}

// writeMarks writes both marks with token. The erasable one goes first: a
// pair cut short then lacks its durable half, which reads as tampering and
// stops destructive calls, rather than lacking its erasable half, which
// would read as an erase done outside simlock.
func (d *Driver) writeMarks(op, udid, token string) error {
	for _, path := range []string{d.erasableMark(udid), d.durableMark(udid)} {
		if err := writeMark(path, udid, token); err != nil {
			return crash(op, "write the provenance mark: %w", err)
		}
	}
	return nil
}

// tokenOf is the mark token dev's driver data records; "" for a device made
// before marks.
func tokenOf(dev driver.Device) string {
	var data deviceData
	_ = json.Unmarshal(dev.Data, &data) // no data, no token
	return data.MarkToken
}

// withToken is dev with token recorded in its driver data.
func withToken(dev driver.Device, udid, token string) driver.Device {
	var data deviceData
	_ = json.Unmarshal(dev.Data, &data) // data from an older driver is rebuilt
	if data.UDID == "" {
		data.UDID = udid
	}
	data.MarkToken = token
	if b, err := json.Marshal(data); err == nil {
		dev.Data = b
	}
	return dev
}

// Provenance reads the device's two mark files. Both are files on this
// host, so the erasable one is readable whether the simulator runs or not.
func (d *Driver) Provenance(_ context.Context, dev driver.Device) (driver.Provenance, error) {
	const op = "provenance"
	udid, err := udidOf(op, dev)
	if err != nil {
		return driver.Provenance{}, err
	}
	p := driver.Provenance{Token: tokenOf(dev), ErasableReadable: true}
	if p.Durable, err = readMark(d.durableMark(udid)); err != nil {
		return driver.Provenance{}, crash(op, "read the provenance mark: %w", err)
	}
	if p.Erasable, err = readMark(d.erasableMark(udid)); err != nil {
		return driver.Provenance{}, crash(op, "read the provenance mark: %w", err)
	}
	return p, nil
}

// checkDurable refuses a destructive op on a device whose durable mark is
// not the token its driver data records (see driver.CheckDurable).
func (d *Driver) checkDurable(op, udid string, dev driver.Device) error {
	token := tokenOf(dev)
	if token == "" {
		return nil
	}
	durable, err := readMark(d.durableMark(udid))
	if err != nil {
		return crash(op, "read the provenance mark: %w", err)
	}
	if err := driver.CheckDurable(udid, token, durable); err != nil {
		return &driver.CrashError{Op: op, Err: err}
	}
	return nil
}

// cleanToken is the token to mark a device with after simlock cleaned it:
// the one its driver data records; for a device made before marks, the one
// an earlier clean wrote, else a new one. The next MakeReady records it in
// the driver data (see adoptToken).
func (d *Driver) cleanToken(udid string, dev driver.Device) string {
	if t := tokenOf(dev); t != "" {
		return t
	}
	if t, err := readMark(d.durableMark(udid)); err == nil && t != "" && t != unparseableMark {
		return t
	}
	return driver.NewMarkToken()
}

// adoptToken brings a device made before marks under them: it records the
// token of the durable mark an earlier clean wrote or, for a device with no
// mark at all, writes a new pair and records that. A device that has only
// an erasable mark lost its durable one to someone else; it is left as it
// is, for Provenance to report. A device whose driver data has a token is
// returned as it is.
func (d *Driver) adoptToken(ctx context.Context, op, udid string, dev driver.Device) driver.Device {
	if tokenOf(dev) != "" {
		return dev
	}
	durable, err := readMark(d.durableMark(udid))
	if err == nil && durable == "" {
		var erasable string
		if erasable, err = readMark(d.erasableMark(udid)); err == nil && erasable == "" {
			durable = driver.NewMarkToken()
			err = d.writeMarks(op, udid, durable)
		}
	}
	if err != nil || durable == "" || durable == unparseableMark {
		if err != nil {
			d.log.WarnContext(ctx, "could not bring a device under provenance marks", "udid", udid, "err", err)
		}
		return dev
	}
	return withToken(dev, udid, durable)
}

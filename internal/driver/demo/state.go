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
	"github.com/simlock/simlock/internal/homedir"
)

// stateFormat is the version of the snapshot's layout. A snapshot of another
// format is refused rather than guessed at. The generation and the journal
// beside the snapshot came later without a change of format: a snapshot
// without a generation is of generation 0, and one without a journal has no
// changes to replay.
const stateFormat = 1

// StatePath is the snapshot of the world a Driver of platform p keeps when
// Options.StateFile is stateFile: "<stateFile>.<platform>.json". Each
// platform has files of its own, so the two demo drivers of a daemon can be
// given the same StateFile and never write the same file: neither has to
// read, merge or lock the other's world.
func StatePath(stateFile string, p contract.Platform) string {
	return stateFile + "." + string(p) + ".json"
}

// JournalPath is the journal beside StatePath(stateFile, p):
// "<stateFile>.<platform>.journal", the changes made since the snapshot was
// written.
func JournalPath(stateFile string, p contract.Platform) string {
	return stateFile + "." + string(p) + ".journal"
}

// minJournalLines is the least number of lines the journal may grow to
// before it is compacted, so that a small world is not rewritten every few
// operations.
const minJournalLines = 1024

// journalBound is how many lines the journal of a world of n devices may
// hold. Twice the devices makes a compaction, which writes every device,
// cost at most half a device's record per line appended since the last one.
func journalBound(devices int) int {
	return max(minJournalLines, 2*devices)
}

// worldFile is the layout of the snapshot.
type worldFile struct {
	Format int `json:"format"`
	// Platform is checked at load, so a file renamed to the other
	// platform's name is refused rather than served.
	Platform contract.Platform `json:"platform"`
	// Generation counts the compactions that wrote the snapshot. The
	// journal lines that continue it carry the same generation; lines of
	// an earlier one are already part of it (see compactLocked).
	Generation int64 `json:"generation,omitempty"`
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
	// DurableMark and ErasableMark are the tokens of the device's
	// provenance marks; absent for a mark that is gone, or in a world
	// written before marks.
	DurableMark  string `json:"durableMark,omitempty"`
	ErasableMark string `json:"erasableMark,omitempty"`
	// BootDoneAt is when a booting device comes up (epoch ms): its boot
	// goes on whether or not a daemon waits for it.
	BootDoneAt int64 `json:"bootDoneAt,omitempty"`
	// Mode is slim for a device made slim; Slimmed whether its pass is in
	// effect.
	Mode    contract.DeviceMode `json:"mode,omitempty"`
	Slimmed bool                `json:"slimmed,omitempty"`
}

// journalLine is one line of the journal: a device's record as it is now
// (Device and Record), its deletion (Device and Deleted), or the runtimes
// and install count as they are now (Runtimes). Each says what something is,
// not what happened to it, so the last line about a thing is all that
// counts.
type journalLine struct {
	// Gen is the generation of the snapshot the line continues.
	Gen      int64         `json:"gen"`
	Device   string        `json:"device,omitempty"`
	Record   *deviceFile   `json:"record,omitempty"`
	Deleted  bool          `json:"deleted,omitempty"`
	Runtimes *runtimesLine `json:"runtimes,omitempty"`
}

type runtimesLine struct {
	Installs int `json:"installs"`
	// Receipts is worldFile.Runtimes.
	Receipts map[string]string `json:"receipts"`
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

// stateFile is where a Driver records its world: a snapshot (StatePath)
// and a journal beside it (JournalPath).
//
// The snapshot is the whole world, written only by a compaction. The
// journal holds a line for each change made since: an operation appends the
// lines of what it changed, in one write, before it returns, so recording a
// change costs the size of the change, however many devices there are. An
// operation that changed nothing writes nothing.
//
// Appends are not synced. A line written is the kernel's, so the world
// survives the daemon being killed at any moment, SIGKILL included, as
// simlock's SQLite store does (WAL, synchronous=NORMAL); a power cut or a
// kernel crash may lose the last changes or damage the journal, which then
// turns the platform off as a damaged snapshot does. A daemon killed in the
// middle of an append leaves a last line without its newline: the change of
// an operation that never returned, which load ignores.
//
// Once the journal would grow past journalBound lines, or after a write
// failed (the journal may then lack a change or end in a broken line), the
// next change is recorded by a compaction instead: a new snapshot and an
// empty journal. Its cost, proportional to the world, is shared by the lines
// appended since the last one, at least twice as many as there are devices.
type stateFile struct {
	path, journal string
	// mu serialises writes, so that a change never overtakes a later one
	// on its way to disk. It is taken before Driver.mu, never after.
	mu sync.Mutex
	// The fields below, guarded by mu, are what the files say now: the
	// snapshot's generation, the journal's length and the world they hold
	// together, which save compares the driver's world with so as to
	// write only what changed.
	gen      int64
	lines    int
	devices  map[string]deviceFile
	installs int
	receipts map[string]string
	// stale says a write failed, so the files may lack changes: the next
	// save compacts.
	stale bool
}

// save records what changed, since the files last said, in the devices ids
// and in the runtimes: it appends a line per change to the journal or, once
// the journal is full or after a failed write, compacts. ids are the devices
// the caller's operation may have changed; a change to another device would
// be written only by the next compaction. save takes d.mu itself, so the
// caller must not hold it.
func (d *Driver) save(ids ...string) error {
	f := d.file
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d.mu.Lock()
	var lines []journalLine
	for _, id := range ids {
		rec, ok := d.devices[id]
		was, had := f.devices[id]
		switch {
		case ok:
			if now := rec.file(); !had || now != was {
				lines = append(lines, journalLine{Device: id, Record: &now})
			}
		case had:
			lines = append(lines, journalLine{Device: id, Deleted: true})
		}
	}
	if d.installs != f.installs || !maps.Equal(d.receipts, f.receipts) {
		lines = append(lines, journalLine{Runtimes: &runtimesLine{Installs: d.installs, Receipts: maps.Clone(d.receipts)}})
	}
	devices := len(d.devices)
	d.mu.Unlock()

	switch {
	case f.stale || len(lines) > 0 && f.lines+len(lines) > journalBound(devices):
		return d.compactLocked()
	case len(lines) > 0:
		return f.appendLocked(lines)
	}
	return nil
}

// saved is err, or, when err is nil, the failure to record what op changed
// in the devices ids. The save is tried either way, since failed operations
// change things too: a failed boot gives its port back, a fault is used up.
func (d *Driver) saved(op string, err error, ids ...string) error {
	if serr := d.save(ids...); serr != nil && err == nil {
		return crash(op, serr)
	}
	return err
}

// appendLocked writes lines to the end of the journal in one write and,
// once they are written, takes them as what the files say. f.mu must be
// held. The journal is opened for each append, without creating it: one
// that is not there was removed, with changes save cannot know, and the
// compaction that follows a failure writes them all.
func (f *stateFile) appendLocked(lines []journalLine) error {
	var buf bytes.Buffer
	for _, l := range lines {
		l.Gen = f.gen
		b, err := json.Marshal(l)
		if err != nil {
			f.stale = true
			return fmt.Errorf("demo: state file %s: %w", f.journal, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	j, err := homedir.OpenFile(f.journal, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		_, err = j.Write(buf.Bytes())
		if cerr := j.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		// Part of a line may have been written: nothing more is
		// appended after it (see stale).
		f.stale = true
		return fmt.Errorf("demo: state file %s: %w", f.journal, err)
	}
	f.lines += len(lines)
	for _, l := range lines {
		switch {
		case l.Record != nil:
			f.devices[l.Device] = *l.Record
		case l.Deleted:
			delete(f.devices, l.Device)
		default:
			f.installs, f.receipts = l.Runtimes.Installs, l.Runtimes.Receipts
		}
	}
	return nil
}

// compact writes the whole world as a new snapshot and starts an empty
// journal. It takes the locks itself.
func (d *Driver) compact() error {
	d.file.mu.Lock()
	defer d.file.mu.Unlock()
	return d.compactLocked()
}

// compactLocked is compact with d.file.mu held, and d.mu not.
//
// The steps are ordered so that a daemon killed between any two of them
// loses no change of an operation that returned, and applies none twice:
//
//  1. The world is written, as a snapshot of generation gen+1, to a
//     temporary file, which is synced and renamed over the old snapshot.
//     Killed before the rename, the old snapshot and the journal are the
//     world as it was; only the change of the operation compacting, which
//     has not returned, is lost. The temporary file is left behind, and
//     nothing reads it.
//  2. The journal is emptied. Killed before that, the new snapshot lies
//     beside the old journal, whose lines are all of generation gen, and
//     load skips them: the snapshot holds everything they say, and more
//     recent changes, which replaying them would undo (a device the
//     compacting operation destroyed would come back).
//  3. Lines appended from then on carry generation gen+1, so load replays
//     them over the new snapshot.
//
// A failure leaves the driver stale, so the next save compacts again. One
// in step 2 leaves old lines in the journal, which load skips as after a
// kill there; lines appended after them would be replayed.
func (d *Driver) compactLocked() error {
	f := d.file
	d.mu.Lock()
	w := d.snapshotLocked()
	d.mu.Unlock()
	w.Generation = f.gen + 1
	b, err := json.MarshalIndent(w, "", "  ")
	if err == nil {
		err = writeAtomically(f.path, append(b, '\n'))
	}
	if err != nil {
		f.stale = true
		return fmt.Errorf("demo: state file %s: %w", f.path, err)
	}
	f.gen, f.devices, f.installs, f.receipts = w.Generation, w.Devices, w.Installs, w.Runtimes
	if err := emptyJournal(f.journal); err != nil {
		f.stale = true
		return fmt.Errorf("demo: state file %s: %w", f.journal, err)
	}
	f.lines, f.stale = 0, false
	return nil
}

// emptyJournal truncates the journal at path, creating it with mode 0600
// if it is not there.
func emptyJournal(path string) error {
	j, err := homedir.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = j.Chmod(0o600)
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	return err
}

// snapshotLocked needs d.mu held.
func (d *Driver) snapshotLocked() worldFile {
	w := worldFile{
		Format:   stateFormat,
		Platform: d.platform,
		Installs: d.installs,
		Runtimes: maps.Clone(d.receipts),
		Devices:  make(map[string]deviceFile, len(d.devices)),
	}
	for id, rec := range d.devices {
		w.Devices[id] = rec.file()
	}
	return w
}

// file is the record of the device; the caller holds d.mu.
func (rec *device) file() deviceFile {
	return deviceFile{
		Model:        rec.spec.Model,
		OSVersion:    rec.spec.OSVersion,
		State:        rec.state.name(),
		Port:         rec.port,
		BootFails:    rec.bootFails,
		ReclaimFails: rec.reclaimFails,
		DurableMark:  rec.durable,
		ErasableMark: rec.erasable,
		BootDoneAt:   rec.bootDoneAt,
		Mode:         rec.spec.Mode,
		Slimmed:      rec.slimmed,
	}
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

// world is a world read from the files and checked, not yet the driver's.
type world struct {
	gen      int64
	installs int
	runtimes map[string]string
	devices  map[string]*device
}

// load reads the world from the snapshot, if there is one, and the journal
// lines of its generation into a driver that is not yet shared. It must run
// before Options.Installed is applied, which has the last word on runtimes.
// A damaged file is left as it is for a human to look at, and d as it was.
// New then compacts, which writes the settled world and empties the
// journal.
func (d *Driver) load() error {
	f := d.file
	b, err := homedir.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		// An empty world. A journal left without its snapshot (removed
		// to start afresh) continues a world that is gone; it is emptied
		// first, because the compaction that follows writes generation 1,
		// which its lines may share.
		if err := os.Truncate(f.journal, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("demo: state file %s: %w", f.journal, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("demo: state file %s: %w", f.path, err)
	}
	var wf worldFile
	if err := json.Unmarshal(b, &wf); err != nil {
		return fmt.Errorf("demo: state file %s is corrupt: %w", f.path, err)
	}
	w, err := d.parseWorld(wf)
	if err != nil {
		return fmt.Errorf("demo: state file %s is corrupt: %w", f.path, err)
	}
	if err := d.replay(&w); err != nil {
		return err
	}
	f.gen = w.gen
	d.commit(w)
	return nil
}

// replay applies the journal's lines of w's generation to w. A journal that
// is not there has nothing to say (a home written before there were
// journals). A last line without its newline was being appended when the
// daemon was killed, and is ignored; any other line that cannot be read is
// damage.
func (d *Driver) replay(w *world) error {
	path := d.file.journal
	b, err := homedir.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("demo: state file %s: %w", path, err)
	}
	for n := 1; ; n++ {
		line, rest, complete := bytes.Cut(b, []byte{'\n'})
		if !complete {
			return nil
		}
		b = rest
		if err := d.replayLine(w, line); err != nil {
			return fmt.Errorf("demo: state file %s is corrupt: line %d: %w", path, n, err)
		}
	}
}

func (d *Driver) replayLine(w *world, b []byte) error {
	var l journalLine
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	var (
		dev      *device
		runtimes map[string]string
		installs int
		err      error
	)
	switch {
	case l.Device != "" && l.Runtimes == nil && l.Record != nil && !l.Deleted:
		dev, err = parseDevice(l.Device, *l.Record)
	case l.Device != "" && l.Runtimes == nil && l.Record == nil && l.Deleted:
	case l.Device == "" && l.Runtimes != nil && l.Record == nil && !l.Deleted:
		runtimes = l.Runtimes.Receipts
		installs, err = d.parseRuntimes(runtimes, l.Runtimes.Installs)
	default:
		err = errors.New("not a device's record, a device's deletion or the runtimes")
	}
	if err != nil {
		return err
	}
	switch {
	case l.Gen > w.gen:
		// Only a snapshot that lost its last rename, to a power cut or
		// a hand, is older than the journal.
		return fmt.Errorf("generation %d, after the snapshot's %d", l.Gen, w.gen)
	case l.Gen < w.gen:
		return nil // in the snapshot already (see compactLocked)
	}
	switch {
	case dev != nil:
		w.devices[l.Device] = dev
	case l.Deleted:
		delete(w.devices, l.Device)
	default:
		w.runtimes, w.installs = runtimes, installs
	}
	return nil
}

// parseWorld checks a snapshot whole.
func (d *Driver) parseWorld(wf worldFile) (world, error) {
	if wf.Format != stateFormat {
		return world{}, fmt.Errorf("format %d, want %d", wf.Format, stateFormat)
	}
	if wf.Platform != d.platform {
		return world{}, fmt.Errorf("it holds the %q world, not %q", wf.Platform, d.platform)
	}
	if wf.Generation < 0 {
		return world{}, fmt.Errorf("generation %d", wf.Generation)
	}
	installs, err := d.parseRuntimes(wf.Runtimes, wf.Installs)
	if err != nil {
		return world{}, err
	}
	w := world{gen: wf.Generation, installs: installs, runtimes: wf.Runtimes, devices: make(map[string]*device, len(wf.Devices))}
	for id, f := range wf.Devices {
		if w.devices[id], err = parseDevice(id, f); err != nil {
			return world{}, err
		}
	}
	return w, nil
}

// parseRuntimes checks a map of runtimes to receipts and an install count,
// and returns the count, moved past the number of any receipt.
func (d *Driver) parseRuntimes(runtimes map[string]string, installs int) (int, error) {
	if runtimes == nil {
		return 0, errors.New("no runtimes")
	}
	if installs < 0 {
		return 0, fmt.Errorf("install count %d", installs)
	}
	for v, receipt := range runtimes {
		rv, stamp, err := d.parseInstalled(receipt)
		if err == nil && (stamp == "" || rv != v) {
			err = fmt.Errorf("%q is not a receipt of %s", receipt, v)
		}
		if err != nil {
			return 0, fmt.Errorf("runtime %q: %w", v, err)
		}
		if n, err := strconv.Atoi(stamp); err == nil {
			installs = max(installs, n)
		}
	}
	return installs, nil
}

func parseDevice(id string, f deviceFile) (*device, error) {
	state, ok := parseDevState(f.State)
	if id == "" || !ok || f.BootFails < 0 || f.ReclaimFails < 0 || f.BootDoneAt < 0 {
		return nil, fmt.Errorf("device %q: %+v", id, f)
	}
	return &device{
		spec:         deviceData{Model: f.Model, OSVersion: f.OSVersion, Mode: f.Mode},
		state:        state,
		port:         f.Port,
		bootFails:    f.BootFails,
		reclaimFails: f.ReclaimFails,
		durable:      f.DurableMark,
		erasable:     f.ErasableMark,
		bootDoneAt:   f.BootDoneAt,
		slimmed:      f.Slimmed,
	}, nil
}

// commit replaces the driver's runtimes and devices with w's, settling the
// devices (see settle).
func (d *Driver) commit(w world) {
	for _, v := range slices.Clone(d.catalog.Runtimes) {
		if _, ok := w.runtimes[v]; !ok {
			d.removeLocked(v)
		}
	}
	for v, receipt := range w.runtimes {
		d.installLocked(v, receipt)
	}
	d.installs = w.installs
	d.devices = w.devices
	d.settle()
}

// settle turns the devices just loaded into what a real machine would show
// after the daemon that drove them was killed. A simulator or emulator is a
// process of its own, so a booted device is still running and a stopped one
// still stopped, and a boot goes on without the daemon that asked for it: a
// booting device is up once its boot time has passed (bootDoneAt), and
// booting, its port kept, until then; MakeReady waits for it. (A boot that
// was to fail, by an injected fault, has no such time: it is shut down and
// its port is free.) Other
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
		if rec.state == stateBooting && rec.bootDoneAt == 0 {
			rec.state = stateShutdown // a boot that was to fail, or one from before boots went on alone
		}
		d.upLocked(rec)
		port := rec.port
		rec.port = 0
		if (rec.state != stateBooted && rec.state != stateBooting) || d.platform != contract.PlatformAndroid {
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

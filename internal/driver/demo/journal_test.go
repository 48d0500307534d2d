package demo_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func stat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// hold opens path and stats it. The file is held open until release, so
// that its inode cannot be freed and handed to a new file, which would make
// the two look the same to os.SameFile.
func hold(t *testing.T, path string) (fi os.FileInfo, release func()) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err = f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi, func() { f.Close() }
}

// wantOnly checks that dir holds the files paths and nothing else.
func wantOnly(t *testing.T, dir string, paths ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names, want []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	for _, p := range paths {
		want = append(want, filepath.Base(p))
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("the directory holds %v, want %v", names, want)
	}
}

func snapshotGeneration(t *testing.T, path string) int64 {
	t.Helper()
	var w struct{ Generation int64 }
	if err := json.Unmarshal(read(t, path), &w); err != nil {
		t.Fatal(err)
	}
	return w.Generation
}

// journalWatch counts the lines of a world's journal as operations append
// to them, reading only what was appended since the last update, and the
// compactions, which replace the snapshot and empty the journal.
type journalWatch struct {
	t                  *testing.T
	snapshot, journal  string
	held               os.FileInfo
	release            func()
	off                int64
	lines, compactions int
}

func watch(t *testing.T, base string, p contract.Platform) *journalWatch {
	w := &journalWatch{t: t, snapshot: demo.StatePath(base, p), journal: demo.JournalPath(base, p)}
	w.held, w.release = hold(t, w.snapshot)
	t.Cleanup(func() { w.release() })
	w.update()
	return w
}

func (w *journalWatch) update() {
	w.t.Helper()
	if fi := stat(w.t, w.snapshot); !os.SameFile(fi, w.held) {
		w.compactions++
		w.release()
		w.held, w.release = hold(w.t, w.snapshot)
		w.off, w.lines = 0, 0
	}
	f, err := os.Open(w.journal)
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(w.off, io.SeekStart); err != nil {
		w.t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		w.t.Fatal(err)
	}
	w.off += int64(len(b))
	w.lines += bytes.Count(b, []byte{'\n'})
}

// restarted is the world of a Driver started on the files a daemon killed
// now would leave.
func restarted(t *testing.T, opts demo.Options) string {
	t.Helper()
	opts.StateFile = killed(t, opts.StateFile)
	return demo.World(newDriver(t, opts))
}

func TestStateJournalEveryCompletedOperationSurvivesAKill(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			ctx := t.Context()
			nr := newRuntime[p]
			opts := demo.Options{Platform: p, DownloadableRuntimes: []string{nr.version}, StateFile: filepath.Join(t.TempDir(), "world")}
			d := newDriver(t, opts)
			w := watch(t, opts.StateFile, p)
			rng := rand.New(rand.NewPCG(1, uint64(len(p))))
			var devs []driver.Device
			some := func() driver.Device {
				if len(devs) == 0 {
					return driver.Device{ID: "never-seen"}
				}
				return devs[rng.IntN(len(devs))]
			}
			// Operations that fail (on a device destroyed, vanished or
			// given a fault, on a runtime not installed) are part of the
			// mix: they change things too.
			ops := []func(){
				func() {
					if dev, err := d.Provision(ctx, someSpec(p)); err == nil {
						devs = append(devs, dev)
					}
				},
				func() { _, _ = d.MakeReady(ctx, some()) },
				func() { _, _ = d.MakeReady(ctx, some()) },
				func() { _, _ = d.Reclaim(ctx, some()) },
				func() { _ = d.Shutdown(ctx, some()) },
				func() { _ = d.Destroy(ctx, some()) },
				func() { _ = d.Inject(some().ID, demo.Faults()[rng.IntN(len(demo.Faults()))]) },
				func() { _, _ = d.InstallComponent(ctx, nr.version, nil) },
				func() {
					if info, ok := find(t, d, nr.version); ok {
						_ = d.RemoveComponent(ctx, info)
					}
				},
			}
			for i := range 6000 {
				ops[rng.IntN(len(ops))]()
				w.update()
				if (i+1)%300 == 0 {
					if got, want := restarted(t, opts), demo.World(d); got != want {
						t.Fatalf("after %d operations a Driver started on the files of this one sees\n%s\nwant\n%s", i+1, got, want)
					}
				}
			}
			if w.compactions < 2 {
				t.Errorf("%d compactions in 6000 operations, want at least 2", w.compactions)
			}
		})
	}
}

func TestStateJournalTornLastLineIsIgnored(t *testing.T) {
	base := filepath.Join(t.TempDir(), "world")
	opts := demo.Options{Platform: contract.PlatformAndroid, StateFile: base}
	d := newDriver(t, opts)
	boot(t, d, provision(t, d))
	other := provision(t, d)
	want := demo.World(d)
	gen := snapshotGeneration(t, demo.StatePath(base, contract.PlatformAndroid))
	tails := map[string]string{
		"half a line": fmt.Sprintf(`{"gen":%d,"device":%q,"rec`, gen, other.ID),
		// The newline is written with the line, so a line without it was
		// being appended by an operation that never returned.
		"a line without its newline": fmt.Sprintf(`{"gen":%d,"device":%q,"deleted":true}`, gen, other.ID),
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			home := killed(t, base)
			journal := demo.JournalPath(home, contract.PlatformAndroid)
			if err := os.WriteFile(journal, append(read(t, journal), tail...), 0o600); err != nil {
				t.Fatal(err)
			}
			d, err := demo.New(demo.Options{Platform: contract.PlatformAndroid, StateFile: home})
			if err != nil {
				t.Fatalf("New with a torn last journal line: %v", err)
			}
			if got := demo.World(d); got != want {
				t.Errorf("with a torn last journal line the world is\n%s\nwant\n%s", got, want)
			}
			// New compacted, so no line is ever appended after the torn
			// one.
			if b := read(t, journal); len(b) != 0 {
				t.Errorf("after New the journal holds %q, want it empty", b)
			}
		})
	}
}

func TestStateJournalDamageIsAnError(t *testing.T) {
	base := filepath.Join(t.TempDir(), "world")
	d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid, StateFile: base})
	dev := boot(t, d, provision(t, d))
	good := string(read(t, demo.JournalPath(base, contract.PlatformAndroid)))
	if strings.Count(good, "\n") < 3 {
		t.Fatalf("the journal holds %q, want three lines", good)
	}
	gen := snapshotGeneration(t, demo.StatePath(base, contract.PlatformAndroid))
	line := func(format string, args ...any) string {
		return fmt.Sprintf(`{"gen":%d,`, gen) + fmt.Sprintf(format, args...) + "}\n"
	}
	cases := map[string]string{
		"garbage first line":  "{not json\n" + good,
		"garbage middle line": good + "{not json\n" + line(`"device":%q,"deleted":true`, dev.ID),
		// Complete, as its newline shows, so not torn.
		"garbage last line":   good + "{not json\n",
		"blank line":          good + "\n",
		"trailing":            good + line(`"device":%q,"deleted":true}`, dev.ID),
		"state":               good + line(`"device":"x","record":{"state":"exploded"}`),
		"fault count":         good + line(`"device":"x","record":{"state":"created","reclaimFails":-1}`),
		"record and deletion": good + line(`"device":"x","record":{"state":"created"},"deleted":true`),
		"no device":           good + line(`"record":{"state":"created"}`),
		"nothing":             good + line(`"device":"x"`),
		"runtimes and device": good + line(`"device":"x","deleted":true,"runtimes":{"installs":0,"receipts":{}}`),
		"bad receipt":         good + line(`"runtimes":{"installs":0,"receipts":{"36":"demo:android:35:1"}}`),
		"no receipts":         good + line(`"runtimes":{"installs":0}`),
		"install count":       good + line(`"runtimes":{"installs":-1,"receipts":{}}`),
		// A snapshot older than its journal lost its last rename.
		"newer generation": good + fmt.Sprintf(`{"gen":%d,"device":%q,"deleted":true}`+"\n", gen+1, dev.ID),
	}
	for name, journal := range cases {
		t.Run(name, func(t *testing.T) {
			home := killed(t, base)
			path := demo.JournalPath(home, contract.PlatformAndroid)
			if err := os.WriteFile(path, []byte(journal), 0o600); err != nil {
				t.Fatal(err)
			}
			snapshot := read(t, demo.StatePath(home, contract.PlatformAndroid))
			d, err := demo.New(demo.Options{Platform: contract.PlatformAndroid, StateFile: home})
			if err == nil || d != nil {
				t.Fatalf("New with a damaged journal: err = %v, want an error", err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "corrupt") {
				t.Errorf("error %q does not say %s is corrupt", err, path)
			}
			// Both files are left for a human to look at.
			if got := read(t, path); string(got) != journal {
				t.Error("New changed the damaged journal")
			}
			if got := read(t, demo.StatePath(home, contract.PlatformAndroid)); !bytes.Equal(got, snapshot) {
				t.Error("New changed the snapshot beside a damaged journal")
			}
		})
	}
}

// journalBound is the bound the package promises: a journal of a world of
// n devices is compacted once it would grow past max(1024, 2n) lines.
func journalBound(n int) int { return max(1024, 2*n) }

func TestStateJournalIsCompactedWithinItsBound(t *testing.T) {
	base := filepath.Join(t.TempDir(), "world")
	opts := demo.Options{Platform: contract.PlatformIOS, StateFile: base}
	d := newDriver(t, opts)
	w := watch(t, base, contract.PlatformIOS)
	var devs []driver.Device
	grow := func(n int) {
		t.Helper()
		for len(devs) < n {
			devs = append(devs, provision(t, d))
			w.update()
			if bound := journalBound(len(devs)); w.lines > bound {
				t.Fatalf("with %d devices the journal holds %d lines, past its bound of %d", len(devs), w.lines, bound)
			}
		}
	}
	// fill makes changes until the journal was compacted twice, and
	// checks it was full each time: it holds no more lines than its
	// bound, and is not compacted sooner.
	fill := func() {
		t.Helper()
		bound := journalBound(len(devs))
		compactions, fullest := w.compactions, 0
		for i := 0; w.compactions < compactions+2; i++ {
			if i > 3*bound {
				t.Fatalf("%d changes in a world of %d devices compacted the journal %d times, want 2", i, len(devs), w.compactions-compactions)
			}
			inject(t, d, devs[i%len(devs)].ID, demo.FaultBootFail)
			w.update()
			if w.lines > bound {
				t.Fatalf("with %d devices the journal holds %d lines, past its bound of %d", len(devs), w.lines, bound)
			}
			fullest = max(fullest, w.lines)
		}
		if fullest != bound {
			t.Errorf("with %d devices the journal was compacted at %d lines, want %d", len(devs), fullest, bound)
		}
	}
	grow(10)
	fill()
	// In a larger world the journal may hold more lines, so compactions,
	// which write every device, stay as rare per device.
	grow(1500)
	fill()
	if got, want := restarted(t, opts), demo.World(d); got != want {
		t.Errorf("after the compactions a Driver started on the files sees\n%s\nwant\n%s", got, want)
	}
}

func TestStateJournalCrashDuringCompactionLosesNothing(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			opts := demo.Options{Platform: p, StateFile: filepath.Join(t.TempDir(), "world")}
			d := newDriver(t, opts)
			w := watch(t, opts.StateFile, p)
			kept := boot(t, d, provision(t, d))
			doomed := boot(t, d, provision(t, d))
			provision(t, d)
			// The journal fills up with doomed's record, so the next
			// change compacts.
			for w.update(); w.lines < journalBound(3); w.update() {
				inject(t, d, doomed.ID, demo.FaultBootFail)
			}
			before, beforeWorld := killed(t, opts.StateFile), demo.World(d)
			if err := d.Destroy(t.Context(), doomed); err != nil {
				t.Fatal(err)
			}
			if w.update(); w.compactions != 1 {
				t.Fatalf("the destroy that filled the journal made %d compactions, want 1", w.compactions)
			}
			after, afterWorld := killed(t, opts.StateFile), demo.World(d)
			if strings.Contains(afterWorld, doomed.ID) {
				t.Fatalf("the destroyed device is in the world:\n%s", afterWorld)
			}

			// Killed after the new snapshot was renamed into place but
			// before the journal was emptied: the old journal, all about
			// the doomed device, lies beside a snapshot without it.
			journal := read(t, demo.JournalPath(before, p))
			if err := os.WriteFile(demo.JournalPath(after, p), journal, 0o600); err != nil {
				t.Fatal(err)
			}
			got := demo.World(newDriver(t, demo.Options{Platform: p, StateFile: after}))
			if got != afterWorld {
				t.Errorf("killed between the rename and the journal's truncation, the world comes back as\n%s\nwant\n%s", got, afterWorld)
			}

			// Killed before the rename: the old snapshot and journal, and
			// the new snapshot in a temporary file. The destroy never
			// returned, so the world is as it was before it.
			tmp := demo.StatePath(before, p) + ".tmp-1234"
			if err := os.WriteFile(tmp, read(t, demo.StatePath(after, p)), 0o600); err != nil {
				t.Fatal(err)
			}
			again := newDriver(t, demo.Options{Platform: p, StateFile: before})
			if got := demo.World(again); got != beforeWorld {
				t.Errorf("killed before the rename, the world comes back as\n%s\nwant\n%s", got, beforeWorld)
			}
			wantRunState(t, again, kept.ID, driver.Running)
		})
	}
}

func TestStateFileUnchangedWorldWritesNothing(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			ctx := t.Context()
			base := filepath.Join(t.TempDir(), "world")
			d := newDriver(t, demo.Options{Platform: p, StateFile: base})
			running := boot(t, d, provision(t, d))
			stopped := boot(t, d, provision(t, d))
			if err := d.Shutdown(ctx, stopped); err != nil {
				t.Fatal(err)
			}
			unknown := driver.Device{ID: "never-seen"}
			ops := map[string]func(){
				"boot of a running device":      func() { _, _ = d.MakeReady(ctx, running) },
				"boot of an unknown device":     func() { _, _ = d.MakeReady(ctx, unknown) },
				"reclaim of a stopped device":   func() { _, _ = d.Reclaim(ctx, stopped) },
				"shutdown of a stopped device":  func() { _ = d.Shutdown(ctx, stopped) },
				"destroy of an unknown device":  func() { _ = d.Destroy(ctx, unknown) },
				"inject into an unknown device": func() { _ = d.Inject(unknown.ID, demo.FaultCrash) },
				"crash of a stopped device":     func() { _ = d.Inject(stopped.ID, demo.FaultCrash) },
				"install of an installed runtime": func() {
					_, _ = d.InstallComponent(ctx, catalog(t, d).DefaultRuntime, nil)
				},
				"removal of a runtime not installed": func() {
					_ = d.RemoveComponent(ctx, driver.ComponentInfo{Platform: p, Version: "1.0"})
				},
			}
			snapshot, journal := demo.StatePath(base, p), demo.JournalPath(base, p)
			for name, op := range ops {
				wasSnapshot, release1 := hold(t, snapshot)
				wasJournal, release2 := hold(t, journal)
				before := read(t, journal)
				op()
				if fi := stat(t, snapshot); !os.SameFile(fi, wasSnapshot) {
					t.Errorf("%s rewrote the snapshot", name)
				}
				if fi := stat(t, journal); !os.SameFile(fi, wasJournal) || !bytes.Equal(read(t, journal), before) {
					t.Errorf("%s wrote to the journal", name)
				}
				release1()
				release2()
			}
		})
	}
}

// A snapshot written before there were journals, without a generation and
// with no journal beside it, is the world still.
func TestStateFileWithoutJournalLoads(t *testing.T) {
	base := filepath.Join(t.TempDir(), "world")
	old := `{
  "format": 1,
  "platform": "ios",
  "installs": 2,
  "runtimes": {
    "17.5": "demo:ios:17.5:builtin",
    "18.6": "demo:ios:18.6:builtin",
    "26.1": "demo:ios:26.1:builtin",
    "26.4": "demo:ios:26.4:2"
  },
  "devices": {
    "0A3D9E51-6B9C-4E52-8F0B-2B9A1C6D7E8F": {"model": "iPhone 16", "osVersion": "18.6", "state": "booted", "bootFails": 1}
  }
}
`
	if err := os.WriteFile(demo.StatePath(base, contract.PlatformIOS), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, demo.Options{Platform: contract.PlatformIOS, StateFile: base})
	id := "0A3D9E51-6B9C-4E52-8F0B-2B9A1C6D7E8F"
	wantRunState(t, d, id, driver.Running)
	if info, ok := find(t, d, "26.4"); !ok || info.Receipt != "demo:ios:26.4:2" {
		t.Errorf("FindComponent(26.4) = %+v, %v; want the receipt of the snapshot", info, ok)
	}
	_, err := d.MakeReady(t.Context(), driver.Device{ID: id})
	wantInjected(t, err, "boot")
}

// A journal whose snapshot was removed, to start the world afresh, belongs
// to a world that is gone.
func TestStateJournalWithoutItsSnapshotIsDiscarded(t *testing.T) {
	base := filepath.Join(t.TempDir(), "world")
	d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid, StateFile: base})
	boot(t, d, provision(t, d))
	if err := os.Remove(demo.StatePath(base, contract.PlatformAndroid)); err != nil {
		t.Fatal(err)
	}
	again := newDriver(t, demo.Options{Platform: contract.PlatformAndroid, StateFile: base})
	if got := managed(t, again); len(got) != 0 {
		t.Errorf("with its snapshot removed the world lists %+v, want nothing", got)
	}
	if b := read(t, demo.JournalPath(base, contract.PlatformAndroid)); len(b) != 0 {
		t.Errorf("the journal of the removed snapshot holds %q, want it emptied", b)
	}
}

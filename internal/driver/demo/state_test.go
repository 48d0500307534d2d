package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// managed is what ListManaged reports, in id order.
func managed(t *testing.T, d *demo.Driver) []driver.Observed {
	t.Helper()
	r, err := d.ListManaged(t.Context())
	if err != nil {
		t.Fatalf("ListManaged: %v", err)
	}
	slices.SortFunc(r.Devices, func(a, b driver.Observed) int { return strings.Compare(a.ID, b.ID) })
	return r.Devices
}

// killed copies the state files (snapshots and journals) under base to a
// new base, as a daemon killed now would leave them, so a second Driver can
// start from them while the first one still finishes what it was doing
// without touching them.
func killed(t *testing.T, base string) string {
	t.Helper()
	copyBase := filepath.Join(t.TempDir(), "killed")
	for _, p := range contract.Platforms() {
		for _, path := range []func(string, contract.Platform) string{demo.StatePath, demo.JournalPath} {
			b, err := os.ReadFile(path(base, p))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path(copyBase, p), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	return copyBase
}

func TestStatePath(t *testing.T) {
	if got := demo.StatePath("/x/world", contract.PlatformIOS); got != "/x/world.ios.json" {
		t.Errorf("StatePath(ios) = %q", got)
	}
	if got := demo.StatePath("/x/world", contract.PlatformAndroid); got != "/x/world.android.json" {
		t.Errorf("StatePath(android) = %q", got)
	}
	if got := demo.JournalPath("/x/world", contract.PlatformIOS); got != "/x/world.ios.journal" {
		t.Errorf("JournalPath(ios) = %q", got)
	}
	if got := demo.JournalPath("/x/world", contract.PlatformAndroid); got != "/x/world.android.journal" {
		t.Errorf("JournalPath(android) = %q", got)
	}
}

func TestStateFileWorldSurvivesRestart(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			ctx := t.Context()
			nr := newRuntime[p]
			opts := demo.Options{
				Platform:             p,
				DownloadableRuntimes: []string{nr.version},
				StateFile:            filepath.Join(t.TempDir(), "world"),
			}
			first := newDriver(t, opts)
			running := boot(t, first, provision(t, first))
			crashed := boot(t, first, provision(t, first))
			inject(t, first, crashed.ID, demo.FaultCrash)
			created := provision(t, first)
			destroyed := provision(t, first)
			if err := first.Destroy(ctx, destroyed); err != nil {
				t.Fatal(err)
			}
			installed := install(t, first, nr.version)
			oldest := slices.Min(catalog(t, first).Runtimes) // built in
			info, _ := find(t, first, oldest)
			if err := first.RemoveComponent(ctx, info); err != nil {
				t.Fatal(err)
			}
			inject(t, first, crashed.ID, demo.FaultBootFail)
			inject(t, first, running.ID, demo.FaultReclaimFail)
			before := managed(t, first)
			if len(before) != 3 {
				t.Fatalf("first driver lists %d devices, want 3: %+v", len(before), before)
			}

			second := newDriver(t, opts)
			if after := managed(t, second); !reflect.DeepEqual(after, before) {
				t.Errorf("after the restart ListManaged =\n%+v\nwant\n%+v", after, before)
			}
			wantRunState(t, second, running.ID, driver.Running)
			wantRunState(t, second, crashed.ID, driver.Stopped)
			wantRunState(t, second, created.ID, driver.Stopped)
			if _, ok := observe(t, second, destroyed.ID); ok {
				t.Error("a destroyed device came back")
			}
			if obs, _ := observe(t, second, running.ID); obs.Address != running.Address {
				t.Errorf("running device's address after the restart = %q, want %q", obs.Address, running.Address)
			}

			// Runtimes: the download is installed with its receipt, the
			// removed built-in runtime stays removed.
			if got, ok := find(t, second, nr.version); !ok || got.Receipt != installed.Receipt {
				t.Errorf("after the restart FindComponent(%s) = %+v, %v; want receipt %q", nr.version, got, ok, installed.Receipt)
			}
			resolve(t, second, nr.model, nr.version)
			if _, ok := find(t, second, oldest); ok {
				t.Errorf("removed runtime %s is installed again after the restart", oldest)
			}
			if c := catalog(t, second); slices.Contains(c.Runtimes, oldest) || c.Downloadable != nil {
				t.Errorf("after the restart Runtimes = %v, Downloadable = %v", c.Runtimes, c.Downloadable)
			}

			// The pending faults fire, once each.
			_, err := second.Reclaim(ctx, running)
			wantInjected(t, err, "reclaim")
			_, err = second.MakeReady(ctx, crashed)
			wantInjected(t, err, "boot")
			crashed = boot(t, second, crashed)
			if p == contract.PlatformAndroid {
				// The running emulator still holds its port, so the
				// crashed one cannot be given it.
				if crashed.Address != "emulator-5588" || running.Address != "emulator-5586" {
					t.Errorf("after the restart the crashed device booted at %s, the running one holds %s; want 5588 and 5586", crashed.Address, running.Address)
				}
			}
			if _, err := second.Reclaim(ctx, running); err != nil {
				t.Errorf("second Reclaim after the restart: %v", err)
			}

			// Receipts stay unique across runs.
			got, _ := find(t, second, nr.version)
			if err := second.RemoveComponent(ctx, got); err != nil {
				t.Fatal(err)
			}
			if again := install(t, second, nr.version); again.Receipt == installed.Receipt {
				t.Errorf("a reinstall after the restart repeated receipt %q", again.Receipt)
			}

			// The file is the whole world: nothing outside it is adopted.
			for _, id := range []string{destroyed.ID, "never-seen"} {
				_, err := second.MakeReady(ctx, driver.Device{ID: id})
				wantAbsent(t, err, "boot")
				_, err = second.Reclaim(ctx, driver.Device{ID: id})
				wantAbsent(t, err, "reclaim")
				wantAbsent(t, second.Shutdown(ctx, driver.Device{ID: id}), "shutdown")
				if err := second.Destroy(ctx, driver.Device{ID: id}); err != nil {
					t.Errorf("Destroy(%s): %v, want success", id, err)
				}
				if _, ok := observe(t, second, id); ok {
					t.Errorf("%s is listed after operations on it", id)
				}
			}
		})
	}
}

func TestStateFileBootingDeviceComesBackStopped(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := timed(demo.Options{Platform: p, StateFile: filepath.Join(t.TempDir(), "world")})
				first := newDriver(t, opts)
				running := boot(t, first, provision(t, first))
				booting := provision(t, first)
				// The boot the kill interrupts uses it up: that boot failed.
				inject(t, first, booting.ID, demo.FaultBootFail)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, _ = first.MakeReady(ctx, booting)
				}()
				synctest.Wait() // the boot is under way
				wantRunState(t, first, booting.ID, driver.Transitioning)
				opts.StateFile = killed(t, opts.StateFile)
				cancel()
				<-done

				second := newDriver(t, opts)
				wantRunState(t, second, booting.ID, driver.Stopped)
				wantRunState(t, second, running.ID, driver.Running)
				var again driver.Device
				err := timedOp(t, "MakeReady of the interrupted device", bootTime, func() (err error) {
					again, err = second.MakeReady(t.Context(), booting)
					return err
				})
				if err != nil {
					t.Fatalf("MakeReady of the interrupted device: %v", err)
				}
				if p == contract.PlatformAndroid && again.Address != "emulator-5588" {
					t.Errorf("interrupted device booted at %s, want emulator-5588 (its old port, free again)", again.Address)
				}
			})
		})
	}
}

// A boot outlives the daemon that asked for it, as a simulator's does: the
// next driver sees the device booting, then running once its boot time has
// passed, and a MakeReady meanwhile waits for it, keeping an emulator's
// console port.
func TestStateFileBootingDeviceGoesOnBootingAndComesUp(t *testing.T) {
	for _, p := range contract.Platforms() {
		t.Run(string(p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := timed(demo.Options{Platform: p, StateFile: filepath.Join(t.TempDir(), "world")})
				first := newDriver(t, opts)
				booting := provision(t, first)
				waited := provision(t, first)
				ctx, cancel := context.WithCancel(t.Context())
				var wg sync.WaitGroup
				for _, dev := range []driver.Device{booting, waited} {
					wg.Go(func() { _, _ = first.MakeReady(ctx, dev) })
				}
				synctest.Wait() // the boots are under way
				opts.StateFile = killed(t, opts.StateFile)
				cancel()
				wg.Wait()

				second := newDriver(t, opts)
				wantRunState(t, second, booting.ID, driver.Transitioning)
				var again driver.Device
				err := timedOp(t, "MakeReady of a device whose boot went on", bootTime, func() (err error) {
					again, err = second.MakeReady(t.Context(), waited)
					return err
				})
				if err != nil {
					t.Fatalf("MakeReady of a device whose boot went on: %v", err)
				}
				if p == contract.PlatformAndroid && again.Address == "" {
					t.Errorf("the device whose boot went on came up with no address")
				}
				wantRunState(t, second, waited.ID, driver.Running)
				wantRunState(t, second, booting.ID, driver.Running) // up on its own, nobody waiting
			})
		})
	}
}

func TestStateFileCorruptIsAnError(t *testing.T) {
	// A real snapshot to spoil: the second Driver writes the device the
	// first one journalled into it.
	base := filepath.Join(t.TempDir(), "world")
	d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid, StateFile: base})
	boot(t, d, provision(t, d))
	newDriver(t, demo.Options{Platform: contract.PlatformAndroid, StateFile: base})
	good, err := os.ReadFile(demo.StatePath(base, contract.PlatformAndroid))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(w map[string]any)) []byte {
		var w map[string]any
		if err := json.Unmarshal(good, &w); err != nil {
			t.Fatal(err)
		}
		f(w)
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	firstDevice := func(w map[string]any) map[string]any {
		for _, dev := range w["devices"].(map[string]any) {
			return dev.(map[string]any)
		}
		t.Fatal("no device in the file")
		return nil
	}
	cases := map[string][]byte{
		"empty":          {},
		"garbage":        []byte("{\"format\": 1, \"platf"),
		"truncated":      good[:len(good)/2],
		"trailing":       append(append([]byte{}, good...), '}'),
		"other platform": edit(func(w map[string]any) { w["platform"] = "ios" }),
		"format":         edit(func(w map[string]any) { w["format"] = 2 }),
		"no runtimes":    edit(func(w map[string]any) { delete(w, "runtimes") }),
		"bad receipt":    edit(func(w map[string]any) { w["runtimes"].(map[string]any)["36"] = "demo:android:35:1" }),
		"bare version":   edit(func(w map[string]any) { w["runtimes"].(map[string]any)["36"] = "36" }),
		"state":          edit(func(w map[string]any) { firstDevice(w)["state"] = "exploded" }),
		"fault count":    edit(func(w map[string]any) { firstDevice(w)["bootFails"] = -1 }),
		"generation":     edit(func(w map[string]any) { w["generation"] = -1 }),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			other := filepath.Join(t.TempDir(), "world")
			path := demo.StatePath(other, contract.PlatformAndroid)
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			d, err := demo.New(demo.Options{Platform: contract.PlatformAndroid, StateFile: other})
			if err == nil || d != nil {
				t.Fatalf("New with a corrupt state file = %v, %v; want an error", d, err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "corrupt") {
				t.Errorf("error %q does not say %s is corrupt", err, path)
			}
			// The corrupt file is left for a human to look at.
			if got, _ := os.ReadFile(path); string(got) != string(b) {
				t.Error("New changed the corrupt file")
			}
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "world")
		path := demo.StatePath(other, contract.PlatformIOS)
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := demo.New(demo.Options{Platform: contract.PlatformIOS, StateFile: other})
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("New with a directory as the state file: err = %v, want one naming %s", err, path)
		}
	})
}

func TestStateFileAbsentIsAnEmptyWorld(t *testing.T) {
	for _, p := range contract.Platforms() {
		base := filepath.Join(t.TempDir(), "world")
		d := newDriver(t, demo.Options{Platform: p, StateFile: base})
		if got := managed(t, d); len(got) != 0 {
			t.Errorf("%s: a fresh world lists %+v", p, got)
		}
		want := catalog(t, newDriver(t, demo.Options{Platform: p}))
		if got := catalog(t, d); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: a fresh world's catalog =\n%+v\nwant\n%+v", p, got, want)
		}
		// New wrote the (empty) world, so a second Driver finds it.
		if fi, err := os.Stat(demo.StatePath(base, p)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: state file after New: %v, %v; want mode 0600", p, fi, err)
		}
		if fi, err := os.Stat(demo.JournalPath(base, p)); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 0 {
			t.Errorf("%s: journal after New: %v, %v; want an empty file of mode 0600", p, fi, err)
		}
		if got := managed(t, newDriver(t, demo.Options{Platform: p, StateFile: base})); len(got) != 0 {
			t.Errorf("%s: the second Driver of a fresh world lists %+v", p, got)
		}
	}
}

func TestStateFileOperationsAppendToTheJournal(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	base := filepath.Join(dir, "world")
	path := demo.StatePath(base, contract.PlatformAndroid)
	journal := demo.JournalPath(base, contract.PlatformAndroid)
	d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid, DownloadableRuntimes: []string{"37"}, StateFile: base})
	var dev driver.Device
	installed := func() driver.ComponentInfo { info, _ := find(t, d, "37"); return info }
	steps := []struct {
		name string
		f    func() error
	}{
		{"provision", func() (err error) { dev, err = d.Provision(ctx, someSpec(contract.PlatformAndroid)); return err }},
		{"boot", func() (err error) { dev, err = d.MakeReady(ctx, dev); return err }},
		{"inject", func() error { return d.Inject(dev.ID, demo.FaultReclaimFail) }},
		{"failed reclaim", func() error {
			if _, err := d.Reclaim(ctx, dev); !errors.Is(err, demo.ErrInjected) {
				return errors.New("reclaim did not fail")
			}
			return nil
		}},
		{"install", func() error { _, err := d.InstallComponent(ctx, "37", nil); return err }},
		{"remove", func() error { return d.RemoveComponent(ctx, installed()) }},
		{"shutdown", func() error { return d.Shutdown(ctx, dev) }},
		{"destroy", func() error { return d.Destroy(ctx, dev) }},
	}
	for _, s := range steps {
		snapshot, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		before, err := os.ReadFile(journal)
		if err != nil {
			t.Fatal(err)
		}
		oldSnapshot, release1 := hold(t, path)
		oldJournal, release2 := hold(t, journal)
		err = s.f()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if fi := stat(t, path); !os.SameFile(oldSnapshot, fi) || !bytes.Equal(read(t, path), snapshot) {
			t.Errorf("%s rewrote the snapshot; a change is to be appended to the journal", s.name)
		}
		fi := stat(t, journal)
		if !os.SameFile(oldJournal, fi) {
			t.Errorf("%s replaced the journal rather than appending to it", s.name)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("after %s the journal's mode is %v, want 0600", s.name, fi.Mode().Perm())
		}
		after := read(t, journal)
		added, ok := bytes.CutPrefix(after, before)
		if !ok || len(added) == 0 || added[len(added)-1] != '\n' {
			t.Fatalf("%s did not append whole lines to the journal: it went from\n%s\nto\n%s", s.name, before, after)
		}
		for line := range bytes.Lines(added) {
			if !json.Valid(line) {
				t.Errorf("%s appended %q, not a JSON line", s.name, line)
			}
		}
		// What an operation on one device writes does not grow with the
		// world; a line is about a hundred bytes.
		if len(added) > 512 {
			t.Errorf("%s appended %d bytes: %s", s.name, len(added), added)
		}
		wantOnly(t, dir, path, journal)
		release1()
		release2()
	}
}

func TestStateFileSnapshotIsReplacedAtomically(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "world")
	path := demo.StatePath(base, contract.PlatformAndroid)
	d := newDriver(t, demo.Options{Platform: contract.PlatformAndroid, StateFile: base})
	for range 10 {
		boot(t, d, provision(t, d))
	}

	// A reader never sees a partial snapshot, however the compactions fall.
	stop := make(chan struct{})
	var reads atomic.Int32
	var reader sync.WaitGroup
	reader.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(path)
			if err != nil || !json.Valid(b) {
				t.Errorf("a reader saw %q, %v", b, err)
				return
			}
			reads.Add(1)
		}
	})
	compactions, iterations := 0, 2*journalBound(0)
	for range iterations {
		old, release := hold(t, path)
		if err := d.Inject(provision(t, d).ID, demo.FaultVanish); err != nil {
			t.Fatal(err)
		}
		fi := stat(t, path)
		release()
		if !os.SameFile(old, fi) {
			compactions++
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("a compaction left the snapshot with mode %v, want 0600", fi.Mode().Perm())
			}
		}
	}
	close(stop)
	reader.Wait()
	if reads.Load() == 0 {
		t.Error("the reader never read the snapshot")
	}
	// Ten devices made 30 changes, each iteration makes two more, and a
	// compaction writes each change that would take the journal past
	// journalBound(10) lines.
	if want := (30 + 2*iterations) / (journalBound(10) + 1); compactions != want {
		t.Errorf("%d compactions, want %d", compactions, want)
	}
	wantOnly(t, dir, path, demo.JournalPath(base, contract.PlatformAndroid))
}

func TestStateFileWriteFailureFailsTheOperation(t *testing.T) {
	ctx := t.Context()
	base := filepath.Join(t.TempDir(), "world")
	path := demo.StatePath(base, contract.PlatformIOS)
	journal := demo.JournalPath(base, contract.PlatformIOS)
	d := newDriver(t, demo.Options{Platform: contract.PlatformIOS, StateFile: base})
	kept := provision(t, d)

	// Nothing can be appended to a directory, nor renamed over one,
	// whoever runs the test.
	block := func(path string) {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(path, "blocker"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	block(journal)
	_, err := d.Provision(ctx, someSpec(contract.PlatformIOS))
	wantCrash(t, err, "provision")
	if err != nil && !strings.Contains(err.Error(), journal) {
		t.Errorf("Provision error %q does not name the journal", err)
	}
	// After a failed append the driver compacts, which writes the snapshot
	// but cannot empty the journal.
	if err := d.Inject(kept.ID, demo.FaultBootFail); err == nil || !strings.Contains(err.Error(), journal) {
		t.Errorf("Inject with an unwritable journal: err = %v, want one naming %s", err, journal)
	}
	block(path)
	wantCrash(t, d.Shutdown(ctx, kept), "shutdown")
	err = d.Inject(kept.ID, demo.FaultReclaimFail)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Inject with an unwritable snapshot: err = %v, want one naming %s", err, path)
	}
	for _, p := range []string{path, journal} {
		if _, err := os.Stat(filepath.Join(p, "blocker")); err != nil {
			t.Fatalf("the failed writes left no directory in the way: %v", err)
		}
	}

	// The changes were made nonetheless, as by a tool that crashed after
	// acting: the fault fails the next boot. The next write that can be made
	// records everything the failed ones missed.
	for _, p := range []string{path, journal} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	_, err = d.MakeReady(ctx, kept)
	wantInjected(t, err, "boot")
	boot(t, d, kept)
	want := demo.World(d)
	again := newDriver(t, demo.Options{Platform: contract.PlatformIOS, StateFile: base})
	if got := demo.World(again); len(managed(t, again)) != 2 || got != want {
		t.Errorf("after the failed writes the files hold\n%s\nwant\n%s", got, want)
	}
}

func TestStateFileSharedByBothPlatforms(t *testing.T) {
	base := filepath.Join(t.TempDir(), "world")
	drivers := map[contract.Platform]*demo.Driver{}
	for _, p := range contract.Platforms() {
		drivers[p] = newDriver(t, demo.Options{Platform: p, StateFile: base})
	}
	// Both drivers change their worlds at once.
	var mu sync.Mutex
	made := map[contract.Platform][]string{}
	var wg sync.WaitGroup
	for _, p := range contract.Platforms() {
		for range 8 {
			wg.Go(func() {
				d := drivers[p]
				dev, err := d.Provision(t.Context(), someSpec(p))
				if err == nil {
					dev, err = d.MakeReady(t.Context(), dev)
				}
				if err == nil {
					err = d.Inject(dev.ID, demo.FaultReclaimFail)
				}
				if err != nil {
					t.Errorf("%s: %v", p, err)
					return
				}
				mu.Lock()
				made[p] = append(made[p], dev.ID)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for _, p := range contract.Platforms() {
		again := newDriver(t, demo.Options{Platform: p, StateFile: base})
		var ids []string
		for _, o := range managed(t, again) {
			ids = append(ids, o.ID)
			if o.RunState != driver.Running {
				t.Errorf("%s: %s is %s after the restart, want running", p, o.ID, o.RunState)
			}
		}
		slices.Sort(made[p])
		if !slices.Equal(ids, made[p]) {
			t.Errorf("%s: after the restart the world holds %v, want %v", p, ids, made[p])
		}
		for _, id := range made[p] {
			_, err := again.Reclaim(t.Context(), driver.Device{ID: id})
			wantInjected(t, err, "reclaim")
		}
	}
}

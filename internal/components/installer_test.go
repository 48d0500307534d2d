package components

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// fakeDriver installs components by waiting step per percentage.
type fakeDriver struct {
	platform  contract.Platform
	step      time.Duration
	percents  []float64
	fail      error
	footprint int64

	mu        sync.Mutex
	installed map[string]bool
	calls     []string
}

func newFake(p contract.Platform, installed ...string) *fakeDriver {
	f := &fakeDriver{platform: p, step: time.Second, percents: []float64{0, 41.7, 41.9, 100}, installed: map[string]bool{}, footprint: 8 << 30}
	for _, c := range installed {
		f.installed[c] = true
	}
	return f
}

func (f *fakeDriver) info(c string) driver.ComponentInfo {
	return driver.ComponentInfo{Platform: f.platform, Version: c, Name: "runtime " + c, Receipt: c + "@1"}
}

func (f *fakeDriver) FindComponent(_ context.Context, c string) (driver.ComponentInfo, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.info(c), f.installed[c], nil
}

func (f *fakeDriver) InstallComponent(ctx context.Context, c string, progress func(driver.InstallProgress)) (driver.InstallResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	for _, p := range f.percents {
		select {
		case <-ctx.Done():
			return driver.InstallResult{}, ctx.Err()
		case <-time.After(f.step):
		}
		progress(driver.InstallProgress{Percent: p})
	}
	if f.fail != nil {
		return driver.InstallResult{}, f.fail
	}
	f.mu.Lock()
	f.installed[c] = true
	f.mu.Unlock()
	return driver.InstallResult{ComponentInfo: f.info(c)}, nil
}

func (f *fakeDriver) RemoveComponent(_ context.Context, c driver.ComponentInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.installed, c.Version)
	return nil
}

func (f *fakeDriver) ListComponents(context.Context) ([]driver.ComponentInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []driver.ComponentInfo
	for c := range f.installed {
		out = append(out, f.info(c))
	}
	return out, nil
}

func (f *fakeDriver) ComponentFootprint(string) int64 { return f.footprint }
func (f *fakeDriver) ComponentDir() string            { return "/volume" }

type memRecords struct {
	mu   sync.Mutex
	recs []Record
}

func (m *memRecords) PutComponent(_ context.Context, r Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, r)
	return nil
}

func (m *memRecords) Components(context.Context) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.recs), nil
}

func (m *memRecords) DeleteComponent(_ context.Context, p contract.Platform, v string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = slices.DeleteFunc(m.recs, func(r Record) bool { return r.Platform == p && r.Version == v })
	return nil
}

type rig struct {
	in     *Installer
	ios    *fakeDriver
	droid  *fakeDriver
	recs   *memRecords
	mu     sync.Mutex
	events []string
}

func newRig(t *testing.T, free int64, timeout time.Duration) *rig {
	r := &rig{ios: newFake(contract.PlatformIOS, "18.6"), droid: newFake(contract.PlatformAndroid), recs: &memRecords{}}
	r.in = New(Options{
		Drivers: map[contract.Platform]driver.Installer{contract.PlatformIOS: r.ios, contract.PlatformAndroid: r.droid},
		Records: r.recs, Timeout: timeout,
		FreeBytes: func(string) (int64, error) { return free, nil },
		Emit: func(name string, p map[string]any) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.events = append(r.events, name+":"+p["component"].(string))
		},
	})
	t.Cleanup(r.in.Close)
	return r
}

// reports collects one caller's reports.
type reports struct {
	mu  sync.Mutex
	got []Report
}

func (c *reports) add(r Report) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, r)
}

func (c *reports) list() []Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

type call struct {
	rep  reports
	done chan struct{}
	res  Result
	err  error
}

func (r *rig) install(p contract.Platform, comp string) *call {
	c := &call{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.res, c.err = r.in.Install(context.Background(), p, comp, c.rep.add)
	}()
	return c
}

func percentOf(r Report) float64 {
	if r.Percent == nil {
		return -1
	}
	return *r.Percent
}

func TestJoinersShareOneInstallAndHearTheLatestAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 100<<30, time.Hour)
		a := r.install(contract.PlatformIOS, "26.4")
		time.Sleep(2500 * time.Millisecond) // two percentages in
		synctest.Wait()
		b := r.install(contract.PlatformIOS, "26.4")
		synctest.Wait()
		got := b.rep.list()
		if len(got) != 1 || got[0].Phase != contract.PhaseDownload || percentOf(got[0]) != 41.7 {
			t.Fatalf("joiner's first reports = %+v, want the latest (41.7) at once", got)
		}
		<-a.done
		<-b.done
		if a.err != nil || b.err != nil || a.res.Outcome != Installed || b.res.Outcome != Installed {
			t.Fatalf("results %+v %v / %+v %v", a.res, a.err, b.res, b.err)
		}
		if len(r.ios.calls) != 1 {
			t.Errorf("driver installs = %v, want one", r.ios.calls)
		}
		first := a.rep.list()
		if len(first) != 6 || first[0].Phase != contract.PhaseDownload || first[0].Percent != nil || first[5].Phase != contract.PhaseRecord {
			t.Errorf("first caller's reports = %+v, want the download's start, four percentages, then the record", first)
		}
		recs, _ := r.recs.Components(context.Background())
		if len(recs) != 1 || recs[0].Receipt != "26.4@1" {
			t.Errorf("records = %+v", recs)
		}
		if want := []string{"component.install-started:26.4", "component.installed:26.4", "catalog.changed:26.4"}; !slices.Equal(r.events, want) {
			t.Errorf("events = %v, want %v", r.events, want)
		}
	})
}

func TestOneQueuePerPlatformAndPlatformsInParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 100<<30, time.Hour)
		t0 := time.Now()
		first := r.install(contract.PlatformIOS, "26.4")
		synctest.Wait()
		second := r.install(contract.PlatformIOS, "26.2")
		droid := r.install(contract.PlatformAndroid, "37")
		synctest.Wait()
		if got := second.rep.list(); len(got) != 1 || got[0].Phase != contract.PhaseQueue {
			t.Fatalf("second iOS install's first report = %+v, want waiting", got)
		}
		<-droid.done
		if took := time.Since(t0); took != 4*time.Second {
			t.Errorf("Android took %s, want 4s: platforms do not wait for each other", took)
		}
		<-first.done
		<-second.done
		if took := time.Since(t0); took != 8*time.Second {
			t.Errorf("two iOS installs took %s, want 8s, one after the other", took)
		}
		got := second.rep.list()
		if len(got) < 2 || got[1].Phase != contract.PhaseDownload {
			t.Errorf("second install's reports = %+v, want waiting then started", got)
		}
	})
}

func TestAlreadyInstalledSendsNothingAndEmitsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 100<<30, time.Hour)
		c := r.install(contract.PlatformIOS, "18.6")
		<-c.done
		if c.err != nil || c.res.Outcome != AlreadyInstalled || len(c.rep.list()) != 0 || len(r.events) != 0 || len(r.ios.calls) != 0 {
			t.Errorf("already installed: %+v %v reports %v events %v calls %v", c.res, c.err, c.rep.list(), r.events, r.ios.calls)
		}
	})
}

func TestNoRoomOnDiskIsRefusedWithTheNumbers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 5<<30, time.Hour)
		c := r.install(contract.PlatformIOS, "26.4")
		<-c.done
		var ce *contract.Error
		if !errors.As(c.err, &ce) || ce.Code != contract.CodeInsufficientDiskSpace ||
			ce.Details["requiredBytes"] != int64(8<<30) || ce.Details["availableBytes"] != int64(5<<30) {
			t.Fatalf("err = %v, want INSUFFICIENT_DISK_SPACE naming 8 GiB required, 5 GiB available", c.err)
		}
		if len(r.ios.calls) != 0 || !slices.Equal(r.events, []string{"component.install-failed:26.4"}) {
			t.Errorf("calls %v events %v", r.ios.calls, r.events)
		}
	})
}

func TestTheOldestCallersDeadlineStopsTheInstallForAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 100<<30, 3*time.Second)
		a := r.install(contract.PlatformIOS, "26.4")
		time.Sleep(time.Second)
		b := r.install(contract.PlatformIOS, "26.4")
		t0 := time.Now()
		<-a.done
		<-b.done
		for _, c := range []*call{a, b} {
			var ce *contract.Error
			if !errors.As(c.err, &ce) || ce.Code != contract.CodeDownloadTimeout {
				t.Errorf("err = %v, want DOWNLOAD_TIMEOUT", c.err)
			}
		}
		if took := time.Since(t0); took != 2*time.Second {
			t.Errorf("stopped %s after the joiner came, want at the first caller's deadline (2s)", took)
		}
		if r.ios.installed["26.4"] {
			t.Error("a stopped install left the component installed")
		}
	})
}

func TestAWaitingInstallNobodyWantsNeverRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 100<<30, time.Hour)
		first := r.install(contract.PlatformIOS, "26.4")
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 1)
		go func() {
			_, err := r.in.Install(ctx, contract.PlatformIOS, "26.2", nil)
			errs <- err
		}()
		synctest.Wait()
		cancel()
		var ce *contract.Error
		if err := <-errs; !errors.As(err, &ce) || ce.Code != contract.CodeCancelled {
			t.Fatalf("cancelled waiter: %v, want CANCELLED", err)
		}
		<-first.done
		synctest.Wait()
		if first.err != nil || slices.Contains(r.ios.calls, "26.2") || len(r.in.Installs()) != 0 {
			t.Errorf("first %v, calls %v, installs %+v: the abandoned install must not run", first.err, r.ios.calls, r.in.Installs())
		}
	})
}

func TestInstallsShowsWhatRunsAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 100<<30, time.Hour)
		r.install(contract.PlatformIOS, "26.4")
		r.install(contract.PlatformIOS, "26.4")
		time.Sleep(2500 * time.Millisecond)
		r.install(contract.PlatformIOS, "26.2")
		synctest.Wait()
		got := r.in.Installs()
		if len(got) != 2 || got[0].State != "downloading" || got[0].Waiters != 2 || got[0].Percent == nil || *got[0].Percent != 41 ||
			got[1].State != "waiting" || got[1].Component != "26.2" {
			t.Fatalf("installs = %+v", got)
		}
	})
}

func TestRemoveOnlyWhatSimlockInstalledAndNobodyUses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 100<<30, time.Hour)
		ctx := context.Background()
		free := func(contract.Platform, string) (func(), error) { return func() {}, nil }
		_, err := r.in.Remove(ctx, contract.ComponentRemoveInput{Platform: contract.PlatformIOS, Version: "18.6"}, free)
		var ce *contract.Error
		if !errors.As(err, &ce) || ce.Code != contract.CodeComponentNotOwned {
			t.Fatalf("remove of a runtime simlock did not install: %v, want COMPONENT_NOT_OWNED", err)
		}
		c := r.install(contract.PlatformIOS, "26.4")
		<-c.done
		list, err := r.in.List(ctx, contract.PlatformIOS, nil)
		if err != nil || len(list) != 2 || !list[0].Owned || list[0].Version != "26.4" || list[1].Owned {
			t.Fatalf("list = %+v, %v; want 26.4 owned, 18.6 not", list, err)
		}
		used := func(contract.Platform, string) (func(), error) {
			return nil, contract.Errorf(contract.CodeComponentInUse, "in use").With("devices", []string{"dev_1"})
		}
		if _, err := r.in.Remove(ctx, contract.ComponentRemoveInput{Platform: contract.PlatformIOS, Version: "26.4"}, used); !errors.As(err, &ce) || ce.Code != contract.CodeComponentInUse {
			t.Fatalf("remove of a runtime in use: %v", err)
		}
		dry, err := r.in.Remove(ctx, contract.ComponentRemoveInput{Platform: contract.PlatformIOS, Version: "26.4", DryRun: true}, free)
		if err != nil || dry.Removed || !r.ios.installed["26.4"] {
			t.Fatalf("dry run = %+v, %v; it must remove nothing", dry, err)
		}
		res, err := r.in.Remove(ctx, contract.ComponentRemoveInput{Platform: contract.PlatformIOS, Version: "26.4"}, free)
		if err != nil || !res.Removed || r.ios.installed["26.4"] {
			t.Fatalf("remove = %+v, %v", res, err)
		}
		if recs, _ := r.recs.Components(ctx); len(recs) != 0 {
			t.Errorf("records after remove = %+v", recs)
		}
		if !slices.Equal(r.events[len(r.events)-2:], []string{"component.removed:26.4", "catalog.changed:26.4"}) {
			t.Errorf("events = %v", r.events)
		}
	})
}

func TestAWaiterWhoseComponentAppearedNeedsNoInstallAndHearsNothingMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 100<<30, time.Hour)
		first := r.install(contract.PlatformIOS, "26.4")
		synctest.Wait()
		second := r.install(contract.PlatformIOS, "26.2")
		synctest.Wait()
		// Someone installs 26.2 by other means while it waits.
		r.ios.mu.Lock()
		r.ios.installed["26.2"] = true
		r.ios.mu.Unlock()
		<-first.done
		<-second.done
		if second.err != nil || second.res.Outcome != AlreadyInstalled {
			t.Fatalf("second = %+v, %v; want already-installed", second.res, second.err)
		}
		if got := second.rep.list(); len(got) != 1 || got[0].Phase != contract.PhaseQueue {
			t.Errorf("reports = %+v, want only waiting (no started, no percent)", got)
		}
		if slices.Contains(r.ios.calls, "26.2") {
			t.Error("the driver installed it again")
		}
	})
}

package daemon

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// slowLogs is the demo Android driver whose DeviceLogs reads until its
// context ends, as a log read of a long window may.
type slowLogs struct {
	*demo.Driver
	entered chan struct{}
	// returned is set once DeviceLogs has returned.
	returned atomic.Bool
}

func (s *slowLogs) DeviceLogs(ctx context.Context, _ driver.Device, _ driver.LogQuery) (contract.DeviceLogs, error) {
	s.entered <- struct{}{}
	<-ctx.Done()
	time.Sleep(50 * time.Millisecond) // the condition under test: a tool that takes a moment to stop
	s.returned.Store(true)
	return contract.DeviceLogs{}, ctx.Err()
}

// A lease's end stops its device tool calls before its device is cleaned,
// as it stops its commands: the call ends (UNKNOWN_LEASE, as a command's
// does), and the device's clean comes after the driver's call returned.
func TestALeasesEndStopsItsDeviceToolCalls(t *testing.T) {
	android, err := demo.New(demo.Options{Platform: contract.PlatformAndroid})
	if err != nil {
		t.Fatal(err)
	}
	slow := &slowLogs{Driver: android, entered: make(chan struct{}, 1)}
	drivers := demoDrivers(t)
	drivers[contract.PlatformAndroid] = slow
	cfg, err := config.Parse([]byte(`{"drivers":{"demo":{"provisionMs":0,"bootMs":0,"reclaimMs":0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, home := startDaemonWith(t, cfg, drivers)
	ctx := context.Background()
	c := dial(t, home, "holder", false)
	evs, _, err := dial(t, home, "watcher", true).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var out contract.DeviceLogs
		done <- c.Call(ctx, contract.OpDeviceLogs, contract.DeviceLogsInput{LeaseRef: contract.LeaseRef{LeaseID: g.Lease.ID}}, &out)
	}()
	select {
	case <-slow.entered:
	case <-time.After(bound):
		t.Fatalf("the device.logs call did not reach the driver within %s", bound)
	}
	if _, err := c.Release(ctx, g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	awaitClean(t, evs, func() {
		if !slow.returned.Load() {
			t.Errorf("the device was cleaned while its lease's device.logs call still ran")
		}
	})
	select {
	case err := <-done:
		if code(err) != contract.CodeUnknownLease {
			t.Errorf("the device.logs call of a lease that ended: %v, want UNKNOWN_LEASE", err)
		}
	case <-time.After(bound):
		t.Fatalf("the device.logs call of a lease that ended did not end within %s", bound)
	}
}

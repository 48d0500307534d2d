package leasing

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

func TestQuarantinedDeviceIsRetriedAndServesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		g := h.mustGrant(h.acquire("a", ios))
		h.drivers[contract.PlatformIOS].FailOn("reclaim", 1)
		h.release("a", g.Lease.ID)
		time.Sleep(reclaimTime)
		synctest.Wait()
		if d := h.e.devices(); d[0].State != contract.DeviceQuarantined {
			t.Fatalf("after a failed clean: %s, want quarantined", d[0].State)
		}
		// The first retry comes after the policy's backoff (30 s by
		// default), not before.
		time.Sleep(30*time.Second - time.Millisecond)
		synctest.Wait()
		if d := h.e.devices(); d[0].State != contract.DeviceQuarantined {
			t.Fatalf("retried early: %s", d[0].State)
		}
		time.Sleep(time.Millisecond + reclaimTime)
		synctest.Wait()
		if d := h.e.devices(); d[0].State != contract.DeviceShutdown {
			t.Fatalf("after the retry: %s, want shutdown (iOS, cleaned)", d[0].State)
		}
		want := []string{"device.purge-failed", "device.quarantined", "device.quarantine-recovered"}
		if got := h.st.names(want...); !slices.Equal(got, want) {
			t.Errorf("events = %v, want %v", got, want)
		}
		// It serves again.
		g2 := h.mustGrant(h.acquire("b", ios))
		if g2.Device.ID != g.Device.ID {
			t.Errorf("granted %s, want the recovered %s", g2.Device.ID, g.Device.ID)
		}
	})
}

func TestQuarantineRetriesBackOffThenDeleteTheDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		g := h.mustGrant(h.acquire("a", ios))
		d := h.drivers[contract.PlatformIOS]
		d.FailOn("reclaim", 1)
		d.FailOn("reclaim", 2)
		d.FailOn("reclaim", 3)
		d.FailOn("reclaim", 4)
		h.release("a", g.Lease.ID)
		t0 := time.Now()
		// Clean fails, then retries at +30 s, +60 s, +120 s (each taking
		// reclaimTime); the third failure spends them and deletes it.
		for range 3*reclaimTime + 30*time.Second + 60*time.Second + 120*time.Second + reclaimTime/4 + reclaimTime {
			time.Sleep(time.Second)
			synctest.Wait()
			if len(h.e.devices()) == 0 {
				break
			}
		}
		if n := len(h.e.devices()); n != 0 {
			t.Fatalf("devices = %+v, want the device deleted", h.e.devices())
		}
		if took := time.Since(t0); took < 210*time.Second {
			t.Errorf("deleted after %s: the retries did not back off", took)
		}
		want := []string{"device.purge-failed", "device.quarantined", "device.quarantine-retry-failed", "device.quarantine-retry-failed", "device.quarantine-abandoned", "device.deleted"}
		if got := h.st.names(slices.Compact(slices.Sorted(slices.Values(want)))...); !slices.Equal(got, want) {
			t.Errorf("events = %v, want %v", got, want)
		}
	})
}

func TestQuarantineRetryResumesAfterARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		h := start(t, st, fixed(2))
		g := h.mustGrant(h.acquire("a", ios))
		h.drivers[contract.PlatformIOS].FailOn("reclaim", 1)
		h.release("a", g.Lease.ID)
		time.Sleep(reclaimTime)
		synctest.Wait()
		h.e.Close()
		h.e.wait()
		time.Sleep(10 * time.Second)
		// A new engine on the same store: the retry is due 30 s after the
		// quarantine, 20 s from now.
		h2 := start(t, st, fixed(2))
		time.Sleep(20*time.Second - time.Millisecond)
		synctest.Wait()
		if d := h2.e.devices(); d[0].State != contract.DeviceQuarantined {
			t.Fatalf("retried before its stored time: %s", d[0].State)
		}
		time.Sleep(time.Millisecond + reclaimTime)
		synctest.Wait()
		if d := h2.e.devices(); d[0].State != contract.DeviceShutdown {
			t.Errorf("after the resumed retry: %s, want shutdown", d[0].State)
		}
	})
}

// An operator's retry cleans a quarantined device now, not at its
// backoff, and takes the timer's place (no second attempt when the
// backoff would have come); a device that is not quarantined, or whose
// retry already runs, is NOT_RETRYABLE, and an unknown one UNKNOWN_DEVICE.
func TestAnOperatorsRetryCleansAQuarantinedDeviceNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newMemStore(), fixed(2))
		g := h.mustGrant(h.acquire("a", ios))
		h.drivers[contract.PlatformIOS].FailOn("reclaim", 1)
		if _, err := h.e.Maintenance().RetryDevice(g.Device.ID); contract.AsError(err).Code != contract.CodeNotRetryable {
			t.Errorf("retry of a leased device: %v, want NOT_RETRYABLE", err)
		}
		h.release("a", g.Lease.ID)
		time.Sleep(reclaimTime)
		synctest.Wait()
		d, err := h.e.Maintenance().RetryDevice(g.Device.ID)
		if err != nil || d.State != contract.DeviceQuarantined {
			t.Fatalf("retry of the quarantined device = %+v, %v; want it as found, quarantined", d, err)
		}
		if _, err := h.e.Maintenance().RetryDevice(g.Device.ID); contract.AsError(err).Code != contract.CodeNotRetryable {
			t.Errorf("a second retry while the first runs: %v, want NOT_RETRYABLE", err)
		}
		time.Sleep(reclaimTime)
		synctest.Wait()
		if ds := h.e.devices(); ds[0].State != contract.DeviceShutdown {
			t.Fatalf("a clean time after the retry: %s, want shutdown (cleaned), well before the 30 s backoff", ds[0].State)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		want := []string{"device.quarantined", "device.retry-requested", "device.quarantine-recovered"}
		if got := h.st.names(want...); !slices.Equal(got, want) {
			t.Errorf("events = %v, want %v: one attempt, the operator's", got, want)
		}
		if _, err := h.e.Maintenance().RetryDevice("dev_nope"); contract.AsError(err).Code != contract.CodeUnknownDevice {
			t.Errorf("retry of an unknown device: %v, want UNKNOWN_DEVICE", err)
		}
	})
}

package daemon

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/ios"
	"github.com/simlock/simlock/internal/ownership"
	"github.com/simlock/simlock/internal/shimtest"
)

// shimIOS is the real iOS driver over the xcrun and xcodebuild shims, on a
// fresh device root.
func shimIOS(t *testing.T, e shimtest.Env) *ios.Driver {
	t.Helper()
	var env []string
	for _, kv := range e.Environ(nil) {
		if strings.HasPrefix(kv, "SIMLOCK_SHIM_STATE=") {
			env = append(env, kv)
		}
	}
	d, err := ios.New(t.Context(), ios.Options{
		Root:     filepath.Join(t.TempDir(), "devices", "ios"),
		Instance: ownership.Instance{ID: "ins_test"},
		Env:      env,
		LookPath: func(name string) (string, error) {
			p := filepath.Join(e.Bin, name)
			if _, err := os.Stat(p); err != nil {
				return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
			}
			return p, nil
		},
		GOOS: "darwin",
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// simctlBoots counts the simctl boot and bootstatus calls the shims saw.
func simctlBoots(t *testing.T, e shimtest.Env) int {
	n := 0
	for _, c := range e.Calls(t) {
		if c.Tool == "xcrun" && len(c.Args) >= 4 && c.Args[0] == "simctl" && (c.Args[3] == "boot" || c.Args[3] == "bootstatus") {
			n++
		}
	}
	return n
}

// A device the iOS driver erased (which leaves it shut down) is booted
// again by the daemon after its release, with warmPool.rewarmReleased at
// its default, and the next lease gets it warm, with no simctl boot
// between the request and the grant.
func TestAReleasedIOSDeviceIsLeasedAgainWarmOnTheShims(t *testing.T) {
	e := shimtest.Build(t)
	_, home := startDaemonWith(t, nil, map[contract.Platform]driver.Driver{contract.PlatformIOS: shimIOS(t, e)})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	admin := dial(t, home, "ops", true)
	events, _, err := admin.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 16"}
	a := dial(t, home, "a", false)
	first, err := a.RequestLease(ctx, want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Release(ctx, first.Lease.ID); err != nil {
		t.Fatal(err)
	}
	for rewarmed := false; !rewarmed; {
		select {
		case ev := <-events:
			var p struct {
				DeviceID  string `json:"deviceId"`
				Initiator string `json:"initiator"`
			}
			_ = json.Unmarshal(ev.Payload, &p)
			rewarmed = ev.Event == "device.ready" && p.Initiator == "rewarm" && p.DeviceID == first.Device.ID
		case <-ctx.Done():
			t.Fatalf("no device.ready with initiator rewarm for %s after its release", first.Device.ID)
		}
	}
	boots := simctlBoots(t, e)
	if boots < 4 {
		t.Fatalf("the shims logged %d simctl boot calls for a lease and a re-warm, want 4 (boot and bootstatus each)", boots)
	}
	g, err := dial(t, home, "b", false).RequestLease(ctx, want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Source != contract.SourceWarm || g.Device.ID != first.Device.ID {
		t.Errorf("the next lease got %s with source %s, want %s warm", g.Device.ID, g.Source, first.Device.ID)
	}
	if n := simctlBoots(t, e) - boots; n != 0 {
		t.Errorf("%d simctl boot calls on the grant path, want none", n)
	}
	st, err := admin.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if wp := st.WarmPool; wp == nil || wp.Grants != (contract.GrantCounts{Warm: 1, Provisioned: 1, WarmRate: 0.5}) {
		t.Errorf("status warm pool = %+v, want 1 warm and 1 provisioned grant", wp)
	}
}

package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/termtest"
)

func TestStatusGolden(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ms := func(d time.Duration) int64 { return now.Add(d).UnixMilli() }
	s := contract.Status{
		Daemon: contract.DaemonInfo{Version: "1.0.0", PID: 4242, Health: "running", Home: "/home/agent/.simlock",
			Protocol: contract.VersionRange{Min: 1, Max: 1}},
		Host: contract.HostInfo{OS: "darwin", Arch: "arm64", CPUs: 10, RAMBytes: 32 << 30, OSVersion: "macOS 15.5"},
		Drivers: []contract.DriverStatus{
			{Platform: "ios", Driver: "ios", Enabled: true, Tools: []contract.ToolVersion{{Name: "xcode", Version: "26.1", Build: "17B55"}}},
			{Platform: "android", Reason: "no driver enabled"},
		},
		Capacity: &contract.Capacity{Strategy: "fixed",
			Global: contract.GlobalCapacity{Running: 1, MaxRunning: 2, Reserved: 1},
			Platforms: map[contract.Platform]contract.PlatformCapacity{
				"ios":     {Running: 1, Reserved: 1, MaxRunning: 2, Devices: 2, MaxDevices: 2},
				"android": {MaxRunning: 2, MaxDevices: 2},
			}},
		Devices: []contract.Device{
			{ID: "dev_a", Spec: contract.DeviceSpec{Platform: "ios", Model: "iPhone 17", OSVersion: "26.1"}, State: "leased", StateSince: ms(-90 * time.Second), LeaseID: "lse_a"},
			{ID: "dev_b", Spec: contract.DeviceSpec{Platform: "ios", Model: "iPhone 16", OSVersion: "18.6"}, State: "provisioning", StateSince: ms(-2 * time.Second)},
			{ID: "dev_c", Spec: contract.DeviceSpec{Platform: "ios", Model: "iPhone 17", OSVersion: "26.1"}, State: "reclaiming", StateSince: ms(-3 * time.Minute),
				TransitionAgeMs: 180_000, Stalled: true},
		},
		Leases: []contract.LeaseRecord{{ID: "lse_a", DeviceID: "dev_a", RequesterID: "claude-code:1", GrantedAt: ms(-90 * time.Second),
			LastRenewedAt: ms(-10 * time.Second), TTLDeadline: ms(5 * time.Minute)}},
		Waiting: []contract.WaitingRequest{
			{RequestID: "req_b", RequesterID: "agent-b", Spec: contract.RequestSpec{Platform: "ios", Model: "iPhone 16", OSVersion: "18.6"}, Stage: "starting", WaitingMs: 2000},
			{RequestID: "req_c", RequesterID: "agent-c", Spec: contract.RequestSpec{Platform: "ios"}, Stage: "queued", QueuePosition: 1, WaitingMs: 12000},
			{RequestID: "req_d", RequesterID: "agent-d", Spec: contract.RequestSpec{Platform: "ios", OSVersion: "26.4"}, Stage: "downloading", WaitingMs: 42000},
		},
		QueueDepth: 1,
		Installs: []contract.InstallStatus{
			{Platform: "ios", Component: "26.4", State: "downloading", Since: ms(-42 * time.Second), Waiters: 2, Percent: pct(41)},
			{Platform: "ios", Component: "26.2", State: "waiting", Since: ms(-5 * time.Second), Waiters: 1},
		},
		WarmPool: &contract.WarmPoolStatus{Enabled: true, Targets: []contract.WarmTargetStatus{
			{WarmTarget: contract.WarmTarget{Platform: "ios", Model: "iPhone 17", Count: 2}, Ready: 1, Booting: 0, Short: 1, Reason: "running-limit"},
		}, RewarmReleased: true, Rewarming: 1,
			Grants: contract.GrantCounts{Warm: 6, Booted: 2, Provisioned: 1, WarmRate: 0.667},
			GrantsByPlatform: map[contract.Platform]contract.GrantCounts{
				"ios":     {Warm: 5, Booted: 2, Provisioned: 1, WarmRate: 0.625},
				"android": {Warm: 1, WarmRate: 1},
			}},
		EventLog: &contract.EventLogStatus{Events: 4200, OldestSeq: 800, OldestTs: ms(-50 * time.Hour), LastSeq: 4999,
			RetentionDays: 7, MaxEvents: 100000, LastPruneAt: ms(-time.Minute), LastPruned: 3, PrunedTotal: 799},
	}
	var b bytes.Buffer
	renderStatus(&b, s, now, false)
	termtest.Golden(t, "status", b.Bytes())

	// The summary: the same status as the daemon sends it with summary,
	// counts where the lists were.
	s.Devices, s.Leases, s.Waiting = nil, nil, nil
	s.Counts = &contract.StatusCounts{Devices: 3, Leases: 1, Waiting: 3,
		DevicesByState: map[contract.DeviceState]int{contract.DeviceLeased: 1, contract.DeviceProvisioning: 1, contract.DeviceReclaiming: 1}}
	b.Reset()
	renderStatus(&b, s, now, true)
	termtest.Golden(t, "status-summary", b.Bytes())
}

func TestCatalogGolden(t *testing.T) {
	res := contract.CatalogResult{Platforms: []contract.Catalog{{
		Platform: "ios", Models: []string{"iPhone 17", "iPad Air 11-inch (M3)", "iPhone 16"},
		Runtimes: []string{"26.1", "18.6"}, DefaultRuntime: "26.1", Downloadable: []string{"26.4"},
		ModelClasses: map[string]contract.DeviceClass{"iPhone 17": "phone", "iPhone 16": "phone", "iPad Air 11-inch (M3)": "tablet"},
	}, {
		Platform: "android", Models: []string{"Pixel 9"}, Runtimes: []string{"36", "35"}, DefaultRuntime: "36",
		ModelClasses: map[string]contract.DeviceClass{"Pixel 9": "phone"},
		Images: []contract.CatalogImage{{Runtime: "36", Tag: "google_apis", ABI: "arm64-v8a"}, {Runtime: "36", Tag: "google_apis_playstore", ABI: "arm64-v8a"},
			{Runtime: "35", Tag: "google_apis", ABI: "arm64-v8a"}},
	}}}
	var b bytes.Buffer
	renderCatalog(&b, res)
	termtest.Golden(t, "catalog", b.Bytes())
}

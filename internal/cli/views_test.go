package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/termtest"
)

// Each human view as a person at a terminal sees it.
func TestHumanViewsGolden(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ms := func(d time.Duration) int64 { return now.Add(d).UnixMilli() }
	views := []struct {
		name   string
		render func(b *bytes.Buffer)
	}{
		{"list-devices", func(b *bytes.Buffer) {
			renderDevicesTable(b, []contract.Device{
				{ID: "dev_a", Spec: contract.DeviceSpec{Platform: "ios", Model: "iPhone 17", OSVersion: "26.1"}, State: "leased", StateSince: ms(-90 * time.Second), LeaseID: "lse_a"},
				{ID: "dev_b", Spec: contract.DeviceSpec{Platform: "android", Model: "Pixel 9", OSVersion: "36"}, State: "ready", StateSince: ms(-2 * time.Hour)},
			}, now)
			renderDevicesTable(b, nil, now)
		}},
		{"list-leases", func(b *bytes.Buffer) {
			renderLeasesTable(b, []contract.LeaseRecord{{ID: "lse_a", DeviceID: "dev_a", RequesterID: "claude-code:1",
				GrantedAt: ms(-90 * time.Second), LastRenewedAt: ms(-10 * time.Second), TTLDeadline: ms(5 * time.Minute)},
				{ID: "ins_w.lse_b", DeviceID: "dev_b", RequesterID: "agent-b", GrantedAt: ms(-time.Hour), Unreachable: true}}, now, 0)
			renderLeasesTable(b, nil, now, 0)
		}},
		{"list-requests", func(b *bytes.Buffer) {
			renderRequestsTable(b, []contract.LeaseRequestRecord{
				{ID: "req_b", RequesterID: "agent-b", Spec: contract.RequestSpec{Platform: "ios", Model: "iPhone 16", OSVersion: "18.6"}, State: "queued", Stage: "queued", QueuePosition: 2, CreatedAt: ms(-12 * time.Second)},
				{ID: "req_c", RequesterID: "agent-c", Spec: contract.RequestSpec{Platform: "android", Class: "tablet"}, State: "starting", Stage: "booting", CreatedAt: ms(-3 * time.Second)},
			}, now)
			renderRequestsTable(b, nil, now)
		}},
		{"list-rules", func(b *bytes.Buffer) {
			renderRulesTable(b, contract.CleanupRulesResult{DiskPressure: true, Rules: []contract.CleanupRule{
				{Name: "idle-shutdown", Action: "shutdown", AfterMs: 600_000, Description: "shut down a device idle this long"},
				{Name: "idle-delete", Action: "delete", AfterMs: 86_400_000, Description: "delete a device idle this long"},
			}})
		}},
		{"token-list", func(b *bytes.Buffer) {
			renderTokensTable(b, []contract.TokenRecord{
				{ID: "tok_1", Role: "operator", Label: "console", CreatedAt: ms(-24 * time.Hour)},
				{ID: "tok_2", Role: "agent", CreatedAt: ms(-time.Hour)},
			})
			renderTokensTable(b, nil)
		}},
		{"component-list", func(b *bytes.Buffer) {
			renderComponentsTable(b, []contract.Component{
				{Platform: "ios", Version: "26.1", Name: "iOS 26.1 (23B80)", Owned: false, SizeBytes: 9 << 30, Devices: 2, ForeignDevices: 3},
				{Platform: "android", Version: "36", Name: "system-images;android-36;google_apis;arm64-v8a", Owned: true, Devices: 1},
			})
			renderComponentsTable(b, nil)
		}},
		{"doctor", func(b *bytes.Buffer) {
			renderDoctor(b, contract.DoctorResult{Findings: []contract.Finding{
				{Kind: "prerequisite-missing", Platform: "android", Prerequisite: "emulator", Message: "the Android emulator is not installed.", Remedy: "sdkmanager --install emulator"},
				{Kind: "lease-overdue", Message: "lease lse_a is past its deadline and still held", DeviceID: "dev_a", Fixed: true},
			}})
			renderDoctor(b, contract.DoctorResult{})
		}},
		{"grant", func(b *bytes.Buffer) {
			g := contract.LeaseGrant{
				Device: contract.GrantDevice{ID: "dev_a", Address: "0F1E2D3C-AAAA-BBBB-CCCC-112233445566",
					Spec: contract.DeviceSpec{Platform: "ios", Model: "iPhone 17", OSVersion: "26.1"}},
				Lease:       contract.LeaseRecord{ID: "lse_a", DeviceID: "dev_a", TTLMs: 1_800_000, TTLDeadline: ms(30 * time.Minute)},
				Environment: map[string]string{contract.EnvIOSDeviceSet: "/Users/me/.simlock/devices/ios"},
				Source:      contract.SourceWarm,
			}
			renderGrant(b, g, false, 0)
			g.Device = contract.GrantDevice{ID: "dev_b", Address: "emulator-5554", Spec: contract.DeviceSpec{Platform: "android", Model: "Pixel 9", OSVersion: "36"}}
			g.Lease.ID, g.Environment = "lse_b", map[string]string{contract.EnvAndroidADBPort: "5037"}
			renderGrant(b, g, true, 0)
		}},
	}
	for _, v := range views {
		var b bytes.Buffer
		v.render(&b)
		termtest.Golden(t, v.name, b.Bytes())
	}
}

// release --all on a terminal asks, as nuke does; an answer other than yes
// changes nothing and exits 2 before any daemon is reached.
func TestReleaseAllAsksOnATerminal(t *testing.T) {
	var out, errOut bytes.Buffer
	env := Env{Stdin: bytes.NewBufferString("no\n"), Stdout: &out, Stderr: &errOut, StdinIsTerminal: true,
		Getenv: func(k string) string {
			if k == "SIMLOCK_HOME" {
				return t.TempDir()
			}
			return ""
		}}
	if code := Run(t.Context(), []string{"release", "--all"}, env); code != 2 {
		t.Fatalf("release --all answered no exited %d, want 2; stderr %q", code, errOut.String())
	}
	if got := errOut.String(); !bytes.Contains([]byte(got), []byte("This ends every lease and cancels every waiting request. Type yes to go on: ")) ||
		!bytes.Contains([]byte(got), []byte("release --all not confirmed")) {
		t.Errorf("stderr %q does not ask and then refuse", got)
	}
}

package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/termtest"
)

// The views fitted to a terminal's width, at 120 and 60 columns: no line
// reaches the last column, the grant wraps between words under its field,
// and a gateway's lease table names each lease's worker and elides its
// long ids at 60 (JSON keeps them whole).
func TestViewsFitTheWidthGolden(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ms := func(d time.Duration) int64 { return now.Add(d).UnixMilli() }
	grant := contract.LeaseGrant{
		Device: contract.GrantDevice{ID: "dev_3f9a2c71d0b84e55", Address: "0F1E2D3C-AAAA-BBBB-CCCC-112233445566",
			Spec: contract.DeviceSpec{Platform: "ios", Model: "iPad Pro 13-inch (M4)", OSVersion: "26.1"}},
		Lease:       contract.LeaseRecord{ID: "lse_ec5e16d815965da4", DeviceID: "dev_3f9a2c71d0b84e55", TTLMs: 1_800_000, TTLDeadline: ms(30 * time.Minute)},
		Environment: map[string]string{contract.EnvIOSDeviceSet: "/Users/me/.simlock/devices/ios"},
		Source:      contract.SourceProvisioned,
	}
	worker := &contract.WorkerRef{ID: "ins_5d1c0e6a9b2f4c37a1e2", Label: "mac-mini-b"}
	leases := []contract.LeaseRecord{
		{ID: "ins_5d1c0e6a9b2f4c37a1e2.lse_ec5e16d815965da4d0c1a2b3c4d5e6", DeviceID: "ins_5d1c0e6a9b2f4c37a1e2.dev_e3374b59d89e",
			RequesterID: "claude-code:0b5f1c2e-8d7a", Worker: worker, GrantedAt: ms(-90 * time.Second), LastRenewedAt: ms(-10 * time.Second), TTLDeadline: ms(5 * time.Minute)},
		{ID: "walkthrough-1", DeviceID: "ins_5d1c0e6a9b2f4c37a1e2.dev_0c1d", RequesterID: "walkthrough", Worker: worker,
			GrantedAt: ms(-time.Hour), Unreachable: true},
	}
	for _, width := range []int{120, 60} {
		views := map[string]func(b *bytes.Buffer){
			"grant": func(b *bytes.Buffer) {
				renderGrant(b, grant, false, width)
				renderGrant(b, grant, true, width)
			},
			"list-leases-fleet": func(b *bytes.Buffer) { renderLeasesTable(b, leases, now, width) },
		}
		for name, render := range views {
			var b bytes.Buffer
			render(&b)
			termtest.Golden(t, fmt.Sprintf("%s-%d", name, width), b.Bytes())
			for _, l := range strings.Split(b.String(), "\n") {
				if n := utf8.RuneCountInString(l); n >= width {
					t.Errorf("%s at %d columns: a line of %d columns: %q", name, width, n, l)
				}
			}
		}
	}
}

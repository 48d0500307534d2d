package ios

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/atomicfile"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// A slim device is a simulator with background services disabled: it
// boots sooner and holds less memory, which matters when a Mac runs many.
// The pass runs `launchctl disable system/<label>` inside the booted
// simulator (through `simctl spawn`), then boots it again, since a disable
// takes effect at the next boot. The disables are written into the
// device's data, so an erase undoes them; a slim mark beside the erasable
// provenance mark (data/simlock-slim.json, which the same erase takes)
// records the signature of what was disabled, so a device still slimmed
// to the current signature is only booted.
//
// launchctl disable needs iOS 18.5 or later in the simulator; on an older
// runtime a slim request is served full (ResolveSpec never returns a slim
// spec there, and the catalog's SlimRuntimes leave it out).

// minSlimVersion is the first iOS that takes launchctl disable in a
// simulator.
var minSlimVersion = version{n: 2, parts: [3]int{18, 5}}

// slimmable reports whether a device of this runtime can be slimmed.
func slimmable(v version) bool { return v.compare(minSlimVersion) >= 0 }

// slimChunk is how many labels one spawn disables, and slimChunkTimeout
// how long it may take: a few hundred launchctl calls in one shell would
// risk the command timeout, one per label would take a process each.
const (
	slimChunk        = 50
	slimChunkTimeout = 60 * time.Second
)

// slimFailed starts the line the pass's script prints for a label it could
// not disable.
const slimFailed = "simlock-slim-failed "

// slimLabels are the launchd services of each ios.slim.categories group:
// daemons a test run does not need, whose work at boot (indexing,
// analysis, sync, telemetry) is what makes a full simulator slow to settle.
// A runtime without one of them reports it as unknown; it is not an error.
var slimLabels = map[string][]string{
	"widgets":      {"com.apple.chronod"},
	"siri":         {"com.apple.assistantd", "com.apple.siriknowledged", "com.apple.siriactionsd", "com.apple.siriinferenced"},
	"search":       {"com.apple.spotlightknowledged", "com.apple.corespotlightservice", "com.apple.parsecd", "com.apple.suggestd"},
	"icloud":       {"com.apple.cloudd", "com.apple.bird", "com.apple.cloudphotod", "com.apple.itunescloudd"},
	"store":        {"com.apple.appstored", "com.apple.itunesstored", "com.apple.storekitd", "com.apple.gamed"},
	"pim":          {"com.apple.calaccessd", "com.apple.remindd", "com.apple.dataaccess.dataaccessd"},
	"web":          {"com.apple.Safari.SafeBrowsing.Service", "com.apple.webbookmarksd"},
	"family":       {"com.apple.familycircled", "com.apple.familycontrols", "com.apple.ScreenTimeAgent"},
	"health":       {"com.apple.healthd", "com.apple.healthappd"},
	"photos":       {"com.apple.photoanalysisd", "com.apple.mediaanalysisd"},
	"apps":         {"com.apple.tipsd", "com.apple.newsd", "com.apple.navd"},
	"messaging":    {"com.apple.imagent", "com.apple.identityservicesd"},
	"connectivity": {"com.apple.sharingd", "com.apple.rapportd", "com.apple.nearbyd"},
	"telemetry":    {"com.apple.analyticsd", "com.apple.triald", "com.apple.dprivacyd"},
	"other":        {"com.apple.coreduetd", "com.apple.duetexpertd", "com.apple.proactiveeventtrackerd", "com.apple.biomed"},
}

// SlimOptions configures the slim pass.
type SlimOptions struct {
	// Categories are the ios.slim.categories groups to disable, in
	// contract.SlimCategories order; nil or empty means all of them.
	Categories []string
	// BootTimeout bounds the boot after the pass (ios.slim.bootTimeoutMs);
	// 0 means ten minutes.
	BootTimeout time.Duration
}

// withDefaults applies the defaults and puts the categories in their
// canonical order, so the signature does not depend on how config lists
// them.
func (o SlimOptions) withDefaults() SlimOptions {
	cats := []string{}
	for _, c := range contract.SlimCategories() {
		if len(o.Categories) == 0 || slices.Contains(o.Categories, c) {
			cats = append(cats, c)
		}
	}
	o.Categories = cats
	if o.BootTimeout <= 0 {
		o.BootTimeout = 10 * time.Minute
	}
	return o
}

// labels lists the services the categories disable.
func (o SlimOptions) labels() []string {
	var out []string
	for _, c := range o.Categories {
		out = append(out, slimLabels[c]...)
	}
	return out
}

// signature names a runtime and the services disabled on it: a device
// slimmed to another signature (other categories, or an older table) is
// slimmed again.
func (o SlimOptions) signature(runtimeID string) string {
	h := sha256.New()
	fmt.Fprintf(h, "slim/1\n%s\n%s\n", runtimeID, strings.Join(o.labels(), "\n"))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// slimMark is the file that says a device's data carries a slim pass.
const slimMarkFile = "simlock-slim.json"

type slimRecord struct {
	Signature  string   `json:"signature"`
	Categories []string `json:"categories"`
	WrittenAt  string   `json:"writtenAt"`
}

func (d *Driver) slimMark(udid string) string {
	return filepath.Join(d.root, udid, "data", slimMarkFile)
}

// slimmedTo is the signature the device's slim mark records, "" when it
// has none (never slimmed, or erased since).
func (d *Driver) slimmedTo(udid string) string {
	b, err := os.ReadFile(d.slimMark(udid))
	if err != nil {
		return ""
	}
	var r slimRecord
	if json.Unmarshal(b, &r) != nil {
		return ""
	}
	return r.Signature
}

func (d *Driver) writeSlimMark(udid, sig string, cats []string) error {
	b, _ := json.Marshal(slimRecord{Signature: sig, Categories: cats, WrittenAt: time.Now().UTC().Format(time.RFC3339)})
	return atomicfile.Write(d.slimMark(udid), b, 0o600)
}

// slimScript disables labels, printing slimFailed and the label for each
// that launchctl refuses. The simulator's own shell runs it; labels are
// the driver's constants, never input, and are quoted anyway.
func slimScript(labels []string) string {
	quoted := make([]string, len(labels))
	for i, l := range labels {
		quoted[i] = "'" + l + "'"
	}
	return `[ -n "$SIMULATOR_ROOT" ] && export DYLD_ROOT_PATH="$SIMULATOR_ROOT"; for l in ` + strings.Join(quoted, " ") +
		`; do launchctl disable "system/$l" >/dev/null 2>&1 || echo "` + slimFailed + `$l"; done`
}

// slim brings a booted device made slim to the current signature: nothing
// when its mark already says so, else the pass and a second boot. Only a
// failure of that second boot is returned (the device is not running);
// every other failure leaves the device running full, in the outcome.
func (d *Driver) slim(ctx context.Context, op, udid string, data deviceData) (*driver.SlimOutcome, error) {
	o := d.slimOpts
	sig := o.signature(data.RuntimeID)
	out := &driver.SlimOutcome{Categories: o.Categories, Signature: sig}
	labels := o.labels()
	out.Labels = len(labels)
	if d.slimmedTo(udid) == sig {
		out.Slimmed = true
		return out, nil
	}
	start := time.Now()
	driver.BootStep(ctx, fmt.Sprintf("slim: disabling %d background services", len(labels)))
	for c := range slices.Chunk(labels, slimChunk) {
		res, err := d.simctl(ctx, op, slimChunkTimeout, nil, "spawn", udid, "/bin/sh", "-c", slimScript(c))
		if err != nil {
			out.Err = fmt.Errorf("slim pass: %w", err)
			return out, nil
		}
		for line := range strings.Lines(string(res)) {
			if l, ok := strings.CutPrefix(strings.TrimSpace(line), slimFailed); ok && slices.Contains(c, l) {
				out.UnknownLabels = append(out.UnknownLabels, l)
			}
		}
	}
	if err := d.stop(ctx, op, udid); err != nil {
		out.Err = fmt.Errorf("slim pass: shut down for the second boot: %w", err)
		return out, nil
	}
	driver.BootStep(ctx, "slim: booting again without them")
	if err := d.boot(ctx, op, udid, o.BootTimeout); err != nil {
		return out, err
	}
	out.Duration = time.Since(start)
	if err := d.writeSlimMark(udid, sig, o.Categories); err != nil {
		// The services are disabled, but the next boot cannot know: it
		// will run the pass again, which is harmless.
		out.Err = fmt.Errorf("slim pass: write its mark: %w", err)
		out.Slimmed, out.Applied = true, true
		return out, nil
	}
	out.Slimmed, out.Applied = true, true
	return out, nil
}

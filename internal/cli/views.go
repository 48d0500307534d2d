package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/howto"
)

// The human views of results, for a person at a terminal; with --json, or
// when stdout is not a terminal, the same results print as JSON.

// table writes rows under a header, in columns two spaces apart, or
// none when there are no rows.
func table(w io.Writer, none string, header []string, rows [][]string) {
	if len(rows) == 0 {
		fmt.Fprintln(w, none)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func renderDevicesTable(w io.Writer, ds []contract.Device, now time.Time) {
	rows := make([][]string, 0, len(ds))
	for _, d := range ds {
		state := string(d.State)
		if d.Stalled {
			state += " (stalled)"
		}
		rows = append(rows, []string{d.ID, string(d.Spec.Platform), d.Spec.Model, d.Spec.OSVersion, state,
			roundDur(now.Sub(time.UnixMilli(d.StateSince))), dash(d.LeaseID)})
	}
	table(w, "No devices.", []string{"DEVICE", "PLATFORM", "MODEL", "OS", "STATE", "FOR", "LEASE"}, rows)
}

func renderLeasesTable(w io.Writer, ls []contract.LeaseRecord, now time.Time) {
	rows := make([][]string, 0, len(ls))
	for _, l := range ls {
		if l.Unreachable {
			// Its worker is away: the gateway knows the lease from its
			// grant record, not when it was renewed or ends.
			rows = append(rows, []string{l.ID, l.DeviceID, l.RequesterID, roundDur(now.Sub(time.UnixMilli(l.GrantedAt))) + " ago",
				"-", "unreachable"})
			continue
		}
		rows = append(rows, []string{l.ID, l.DeviceID, l.RequesterID, roundDur(now.Sub(time.UnixMilli(l.GrantedAt))) + " ago",
			roundDur(now.Sub(time.UnixMilli(l.LastRenewedAt))) + " ago", roundDur(time.UnixMilli(l.TTLDeadline).Sub(now))})
	}
	table(w, "No active leases.", []string{"LEASE", "DEVICE", "REQUESTER", "GRANTED", "RENEWED", "EXPIRES IN"}, rows)
}

func renderRequestsTable(w io.Writer, rs []contract.LeaseRequestRecord, now time.Time) {
	rows := make([][]string, 0, len(rs))
	for _, r := range rs {
		state := string(r.State)
		if r.Stage != "" {
			state = string(r.Stage)
		}
		if r.Stage == contract.StageQueued && r.QueuePosition > 0 {
			state = "queued " + ordinal(r.QueuePosition)
		}
		rows = append(rows, []string{r.ID, r.RequesterID, specWords(r.Spec), state, roundDur(now.Sub(time.UnixMilli(r.CreatedAt)))})
	}
	table(w, "No open requests.", []string{"REQUEST", "REQUESTER", "WANTS", "STATE", "WAITING"}, rows)
}

// specWords is a request's wants: "ios iPhone 17 26.1", "android tablet".
func specWords(s contract.RequestSpec) string {
	what := s.Model
	if what == "" {
		what = string(s.Class)
	}
	return strings.Join(slices.DeleteFunc([]string{string(s.Platform), what, s.OSVersion}, func(x string) bool { return x == "" }), " ")
}

func renderRulesTable(w io.Writer, res contract.CleanupRulesResult) {
	rows := make([][]string, 0, len(res.Rules))
	for _, r := range res.Rules {
		rows = append(rows, []string{r.Name, r.Action, roundDur(time.Duration(r.AfterMs) * time.Millisecond), r.Description})
	}
	table(w, "No cleanup rules.", []string{"RULE", "ACTION", "AFTER", "WHAT"}, rows)
	if res.DiskPressure {
		fmt.Fprintln(w, "The disk is short of space: idle devices are deleted once the shutdown rule's delay has passed.")
	}
}

func renderTokensTable(w io.Writer, ts []contract.TokenRecord) {
	rows := make([][]string, 0, len(ts))
	for _, t := range ts {
		rows = append(rows, []string{t.ID, string(t.Role), dash(t.Label), time.UnixMilli(t.CreatedAt).UTC().Format(time.RFC3339)})
	}
	table(w, "No tokens. simlock token create --role agent|operator makes one.", []string{"TOKEN", "ROLE", "LABEL", "CREATED"}, rows)
}

func renderComponentsTable(w io.Writer, cs []contract.Component) {
	rows := make([][]string, 0, len(cs))
	for _, c := range cs {
		owner := "installed elsewhere"
		if c.Owned {
			owner = "simlock"
		}
		size := "-"
		if c.SizeBytes > 0 {
			size = bytesHuman(c.SizeBytes)
		}
		devices := fmt.Sprint(c.Devices)
		if c.ForeignDevices > 0 {
			devices += fmt.Sprintf(" (+%d not simlock's)", c.ForeignDevices)
		}
		rows = append(rows, []string{string(c.Platform), c.Version, dash(c.Name), owner, size, devices})
	}
	table(w, "No runtimes installed.", []string{"PLATFORM", "VERSION", "NAME", "INSTALLED BY", "SIZE", "DEVICES"}, rows)
}

// renderDoctor lists the findings, what to do about each beside it.
func renderDoctor(w io.Writer, res contract.DoctorResult) {
	if len(res.Findings) == 0 {
		fmt.Fprintln(w, "✓ No problems found.")
		return
	}
	for _, f := range res.Findings {
		mark := "✗"
		if f.Fixed {
			mark = "✓ fixed:"
		}
		where := f.Kind
		if f.Platform != "" {
			where = string(f.Platform) + " " + f.Kind
		}
		line := fmt.Sprintf("%s [%s] %s", mark, where, strings.TrimSuffix(f.Message, "."))
		if f.Remedy != "" {
			line += ". " + f.Remedy
		}
		fmt.Fprintln(w, line)
	}
}

// renderGrant is a grant as a person reads it: the device, the lease and
// how long it lasts, how to use it, and its environment.
func renderGrant(w io.Writer, g contract.LeaseGrant, detach bool) {
	held := "held by this command: it renews it, and releases it at exit or Ctrl-C"
	if detach {
		held = "detached: renew it with simlock lease renew " + g.Lease.ID + ", end it with simlock release " + g.Lease.ID
	}
	source := map[contract.GrantSource]string{
		contract.SourceWarm: "it was ready and idle", contract.SourceBooted: "booted for this lease",
		contract.SourceProvisioned: "created for this lease",
	}[g.Source]
	fmt.Fprintf(w, "Lease    %s (%s)\n", g.Lease.ID, held)
	fmt.Fprintf(w, "Device   %s: %s %s %s at %s", g.Device.ID, g.Device.Spec.Platform, g.Device.Spec.Model, g.Device.Spec.OSVersion, g.Device.Address)
	if source != "" {
		fmt.Fprintf(w, " (%s)", source)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Expires  %s unless renewed (TTL %s)\n", time.UnixMilli(g.Lease.TTLDeadline).UTC().Format(time.RFC3339),
		shortDuration(time.Duration(g.Lease.TTLMs)*time.Millisecond))
	fmt.Fprintf(w, "Use      %s\n", howto.Use(g))
	if len(g.Environment) > 0 {
		fmt.Fprintln(w, "Environment")
		for _, k := range slices.Sorted(maps.Keys(g.Environment)) {
			fmt.Fprintf(w, "  %s=%s\n", k, g.Environment[k])
		}
	}
}

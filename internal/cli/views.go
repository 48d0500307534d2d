package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

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

// renderLeasesTable lists leases, with the worker each is on when a
// gateway lists them. On a terminal (width columns; 0 is unknown, and
// leaves the table whole) it is fitted by cutting the least useful first:
// long ids are elided in the middle (JSON keeps them whole), then below
// 100 columns the granted and renewed times go, then below 80 the device.
func renderLeasesTable(w io.Writer, ls []contract.LeaseRecord, now time.Time, width int) {
	fleet := slices.ContainsFunc(ls, func(l contract.LeaseRecord) bool { return l.Worker != nil || l.WorkerID != "" })
	id := func(s string) string { return s }
	switch {
	case width <= 0:
	case width < 100:
		id = func(s string) string { return elide(s, 12) }
	default:
		id = func(s string) string { return elide(s, 22) }
	}
	times := width <= 0 || width >= 100
	device := width <= 0 || width >= 80
	rows := make([][]string, 0, len(ls))
	for _, l := range ls {
		row := []string{id(l.ID)}
		if device {
			row = append(row, id(l.DeviceID))
		}
		if fleet {
			worker := l.WorkerID
			if l.Worker != nil {
				worker = l.Worker.Label
				if worker == "" {
					worker = l.Worker.ID
				}
			}
			row = append(row, id(dash(worker)))
		}
		row = append(row, id(l.RequesterID))
		if times {
			row = append(row, roundDur(now.Sub(time.UnixMilli(l.GrantedAt)))+" ago", "-")
			if !l.Unreachable {
				row[len(row)-1] = roundDur(now.Sub(time.UnixMilli(l.LastRenewedAt))) + " ago"
			}
		}
		// A lease whose worker is away: the gateway knows it from its
		// grant record, not when it was renewed or ends.
		expires := "unreachable"
		if !l.Unreachable {
			expires = roundDur(time.UnixMilli(l.TTLDeadline).Sub(now))
		}
		rows = append(rows, append(row, expires))
	}
	header := []string{"LEASE"}
	if device {
		header = append(header, "DEVICE")
	}
	if fleet {
		header = append(header, "WORKER")
	}
	header = append(header, "REQUESTER")
	if times {
		header = append(header, "GRANTED", "RENEWED")
	}
	table(w, "No active leases.", append(header, "EXPIRES IN"), rows)
}

// elide keeps at most n columns of s: its start and its end, which tell
// ids apart, around an ellipsis.
func elide(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	tail := (n - 1) / 2
	return string(r[:n-1-tail]) + "…" + string(r[len(r)-tail:])
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
// how long it lasts, how to use it, and its environment; each field is
// wrapped between words to a terminal of width columns (0: unknown, no
// wrap), under its label.
func renderGrant(out io.Writer, g contract.LeaseGrant, detach bool, width int) {
	var b strings.Builder
	w := &b
	defer func() { _, _ = io.WriteString(out, wrapFields(b.String(), width, 9)) }()
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

// termWidth is the terminal's columns, 0 when unknown.
func termWidth(env Env) int {
	if env.TermWidth == nil {
		return 0
	}
	return env.TermWidth()
}

// wrapFields wraps each line of text between words to width columns (the
// last left free), continuing under the field's value, indent columns in;
// a word longer than the room is left whole rather than cut. Width 0
// leaves the text as it is.
func wrapFields(text string, width, indent int) string {
	if width <= 0 {
		return text
	}
	room := width - 1
	var out strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		nl := strings.HasSuffix(line, "\n")
		line = strings.TrimSuffix(line, "\n")
		col := 0
		for i, word := range strings.Split(line, " ") {
			n := utf8.RuneCountInString(word)
			switch {
			case i == 0:
			case col+1+n > room && col > indent:
				out.WriteString("\n" + strings.Repeat(" ", indent))
				col = indent
			default:
				out.WriteByte(' ')
				col++
			}
			out.WriteString(word)
			col += n
		}
		if nl {
			out.WriteByte('\n')
		}
	}
	return out.String()
}

package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The renderers below are pure: the result in, text out.

// fmtUs shows microseconds in the unit that suits them.
func fmtUs(us float64) string {
	switch {
	case us < 10:
		return fmt.Sprintf("%.2f µs", us)
	case us < 1000:
		return fmt.Sprintf("%.0f µs", us)
	case us < 1e6:
		return fmt.Sprintf("%.2f ms", us/1000)
	}
	return fmt.Sprintf("%.2f s", us/1e6)
}

func fmtKiB(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// padRight and padLeft pad to width runes (the table has µ and →).
func padRight(s string, width int) string {
	return s + strings.Repeat(" ", max(0, width-utf8.RuneCountInString(s)))
}

func padLeft(s string, width int) string {
	return strings.Repeat(" ", max(0, width-utf8.RuneCountInString(s))) + s
}

const (
	benchLabelWidth = 36
	benchCellWidth  = 11
)

// RenderTable is the human view of a result.
func RenderTable(w io.Writer, res Result) {
	line := func(label string, cells ...string) {
		var b strings.Builder
		b.WriteString(padRight(label, benchLabelWidth))
		for _, c := range cells {
			b.WriteString(padLeft(c, benchCellWidth))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	m := res.Machine
	fmt.Fprintln(w, res.Command)
	fmt.Fprintf(w, "simlock %s, %s, %s\n", res.Version, m.Go, res.Date)
	fmt.Fprintf(w, "%s, %d cores, %.1f GiB RAM, %s, %s\n\n", m.CPU, m.Cores, float64(m.RAMBytes)/(1<<30), m.OS, m.Arch)

	var head, sub []string
	for _, r := range res.Runs {
		head = append(head, "", fmt.Sprintf("%d leases", r.Leases))
		sub = append(sub, "p50", "p99")
	}
	line("", head...)
	line("", sub...)
	rows := []struct {
		label string
		stat  func(benchRun) benchStat
	}{
		{"renew", func(r benchRun) benchStat { return r.Renew }},
		{"warm grant", func(r benchRun) benchStat { return r.WarmGrant }},
		{"release → next queued grant", func(r benchRun) benchStat { return r.ReleaseToGrant }},
		{"status (full)", func(r benchRun) benchStat { return r.StatusFull }},
		{"status (summary)", func(r benchRun) benchStat { return r.StatusSummary }},
		{"ping", func(r benchRun) benchStat { return r.Ping }},
	}
	for _, row := range rows {
		var cells []string
		for _, r := range res.Runs {
			s := row.stat(r)
			cells = append(cells, fmtUs(s.P50Us), fmtUs(s.P99Us))
		}
		line(row.label, cells...)
	}
	var rss []string
	for _, r := range res.Runs {
		rss = append(rss, fmtKiB(r.RSSKiB), "")
	}
	line("daemon RSS", rss...)
	var rate []string
	for _, r := range res.Runs {
		rate = append(rate, fmt.Sprintf("%.0f/s", r.RenewsPerSecond50), "")
	}
	line(fmt.Sprintf("renewals, %d agents ⁴", renewAgents), rate...)
	fmt.Fprintln(w)
	line("", "p50", "p99")
	line("progress push (driver → client) ¹", fmtUs(res.PushLatency.P50Us), fmtUs(res.PushLatency.P99Us))
	line("floor commit (SQLite)", fmtUs(res.Floor.P50Us), fmtUs(res.Floor.P99Us))
	line("floor commit after 300 µs idle ³", fmtUs(res.FloorIdle.P50Us), fmtUs(res.FloorIdle.P99Us))
	line("daemon start ²", fmt.Sprintf("%.0f ms", res.Start.Ms))
	line("in-situ floor (ping + floor) "+"@"+strconv.Itoa(res.Ratios.Smallest), fmtUs(res.Ratios.InSituUs))
	fmt.Fprintln(w)

	r := res.Ratios
	at := func(n int) string { return "@" + strconv.Itoa(n) }
	x := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	fmt.Fprintln(w, "ratios (of p50s)")
	if r.RenewScale != nil {
		line("renew "+at(r.Largest)+" / "+at(r.Smallest), x(*r.RenewScale))
	}
	line("renew "+at(r.Smallest)+" / floor", x(r.RenewOverFloor))
	line("warm grant "+at(r.Smallest)+" / floor", x(r.WarmGrantOverFloor))
	if r.WarmGrantScale != nil {
		line("warm grant "+at(r.Largest)+" / "+at(r.Smallest), x(*r.WarmGrantScale))
	}
	line("release → grant "+at(r.Smallest)+" / floor", x(r.ReleaseToGrantOverFloor))
	line("renew "+at(r.Smallest)+" / in-situ floor", x(r.RenewOverInSitu))
	line("warm grant "+at(r.Smallest)+" / in-situ floor", x(r.WarmGrantOverInSitu))
	line("release → grant "+at(r.Smallest)+" / in-situ floor", x(r.ReleaseToGrantOverInSitu))
	line("renew "+at(r.Smallest)+" / idle floor ³", x(r.RenewOverIdleFloor))
	if r.SummaryScale != nil {
		line("status summary "+at(r.Largest)+" / "+at(r.Smallest), x(*r.SummaryScale))
	}
	line("status full "+at(r.Largest), fmt.Sprintf("%.2f ms", r.StatusFullMs))
	line("RSS per live lease", fmt.Sprintf("%.2f KiB", r.RSSPerLeaseKiB))
	line("daemon start", fmt.Sprintf("%.0f ms", r.StartMs))
	fmt.Fprintln(w)
	fmt.Fprintf(w, "¹ %d pushes from an in-process daemon (daemon.Start) with a wrapped demo driver;\n", res.PushLatency.Samples)
	fmt.Fprintln(w, "  every other row runs `simlock daemon run` as a subprocess.")
	fmt.Fprintf(w, "² exec to status.get running with %d leases loaded and %d stored events.\n", res.Start.Leases, res.Start.Events)
	fmt.Fprintln(w, "³ the floor's commit, each after 300 µs of doing nothing, as a daemon commits between")
	fmt.Fprintln(w, "  two requests; a reading aid, not a goal (the goals are against the floor).")
	fmt.Fprintf(w, "⁴ %d agent sessions, each renewing as fast as it is answered, counted over %s after %s;\n", renewAgents, renewRateWindow, renewRateWarmup)
	fmt.Fprintln(w, "  with fewer leases than agents, agents share leases.")
}

// RenderMarkdown is the table as docs/PERFORMANCE.md embeds it.
func RenderMarkdown(w io.Writer, res Result) {
	fmt.Fprintln(w, "```text")
	RenderTable(w, res)
	fmt.Fprintln(w, "```")
}

package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// RenderFleetTable is the human view of a fleet result.
func RenderFleetTable(w io.Writer, res FleetResult) {
	line := func(label string, cells ...string) {
		var b strings.Builder
		b.WriteString(padRight(label, benchLabelWidth))
		for _, c := range cells {
			b.WriteString(padLeft(c, benchCellWidth))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	m, f := res.Machine, res.Fleet
	fmt.Fprintln(w, res.Command)
	fmt.Fprintf(w, "simlock %s, %s, %s\n", res.Version, m.Go, res.Date)
	fmt.Fprintf(w, "%s, %d cores, %.1f GiB RAM, %s, %s\n", m.CPU, m.Cores, float64(m.RAMBytes)/(1<<30), m.OS, m.Arch)
	switch {
	case f.Postgres.Skipped != "":
		fmt.Fprintf(w, "PostgreSQL: skipped: %s\n", f.Postgres.Skipped)
	case f.Postgres.Server == "throwaway":
		fmt.Fprintf(w, "PostgreSQL %s: a throwaway cluster on loopback (fsync on)\n", f.Postgres.Version)
	default:
		fmt.Fprintf(w, "PostgreSQL %s: the --postgres server\n", f.Postgres.Version)
	}
	if len(f.Runs) > 0 {
		renderFleetRuns(w, line, f.Runs)
	}
	workers := fmt.Sprintf("%d demo workers", f.Workers)
	if f.Workers == 1 {
		workers = "1 demo worker"
	}
	fmt.Fprintf(w, "%s; grants per second with %d agents leasing and releasing at once\n\n", workers, f.Agents)

	storeName := map[string]string{fleetStoreSQLite: "SQLite", fleetStorePostgres: "PostgreSQL"}
	line("", "p50", "p99")
	for _, s := range f.Stores {
		label := "warm grant via gateway (" + storeName[s.Store] + ") ¹"
		if s.WarmGrant == nil {
			line(label, "skipped")
			continue
		}
		line(label, fmtUs(s.WarmGrant.P50Us), fmtUs(s.WarmGrant.P99Us))
	}
	line("commit (SQLite floor) ²", fmtUs(f.SQLiteCommit.P50Us), fmtUs(f.SQLiteCommit.P99Us))
	if c := f.PostgresCommit; c != nil {
		line("commit (PostgreSQL) ³", fmtUs(c.P50Us), fmtUs(c.P99Us))
	} else {
		line("commit (PostgreSQL) ³", "skipped")
	}
	fmt.Fprintln(w)
	for _, s := range f.Stores {
		label := "grants per second (" + storeName[s.Store] + ")"
		if s.WarmGrant == nil {
			line(label, "skipped")
			continue
		}
		line(label, fmt.Sprintf("%.0f", s.GrantsPerSecond))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "¹ agent → gateway (unix socket) → worker (uplink) → agent, an idle ready device;")
	fmt.Fprintln(w, "  every daemon is `simlock daemon run` as a subprocess.")
	fmt.Fprintln(w, "² one durable SQLite transaction in a scratch file, as `simlock bench` measures it.")
	fmt.Fprintln(w, "³ BEGIN, one small INSERT, COMMIT on the bench's own database, back to back.")
}

// renderFleetRuns is the simulated fleets' table: one column per run.
func renderFleetRuns(w io.Writer, line func(string, ...string), runs []fleetRun) {
	fmt.Fprintf(w, "\nA gateway (SQLite) with N simulated workers of %d devices each; %d requests waiting in the grants row\n\n",
		runs[0].DevicesPerWorker, runs[0].Waiting)
	cells := func(cell func(fleetRun) string) []string {
		out := make([]string, len(runs))
		for i, r := range runs {
			out[i] = cell(r)
		}
		return out
	}
	num := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	line("N workers", cells(func(r fleetRun) string { return strconv.Itoa(r.Workers) })...)
	line("route, p50 ¹", cells(func(r fleetRun) string { return fmtUs(r.Route.P50Us) })...)
	line("route, p99", cells(func(r fleetRun) string { return fmtUs(r.Route.P99Us) })...)
	line("warm grant via gateway, p50 ²", cells(func(r fleetRun) string { return fmtUs(r.GatewayWarmGrant.P50Us) })...)
	line("warm grant via gateway, p99", cells(func(r fleetRun) string { return fmtUs(r.GatewayWarmGrant.P99Us) })...)
	line("warm grant direct, p50 ³", cells(func(r fleetRun) string { return fmtUs(r.DirectWarmGrant.P50Us) })...)
	line("uplink round trip, p50 ⁴", cells(func(r fleetRun) string { return fmtUs(r.UplinkRoundTrip.P50Us) })...)
	line("grants per second ⁵", cells(func(r fleetRun) string { return num(r.GrantsPerSecond) })...)
	line("  (workers freeing, a second)", cells(func(r fleetRun) string { return strconv.Itoa(r.FreeRate) })...)
	line("gateway RSS per worker ⁶", cells(func(r fleetRun) string { return fmt.Sprintf("%.0f KiB", r.RSSPerWorkerKiB) })...)
	line("gateway RSS per waiting request", cells(func(r fleetRun) string { return fmt.Sprintf("%.1f KiB", r.RSSPerWaitingKiB) })...)
	line("reconnect storm ⁷", cells(func(r fleetRun) string { return fmt.Sprintf("%.0f ms", r.ReconnectStormMs) })...)
	line("relayed events per second ⁸", cells(func(r fleetRun) string { return num(r.EventsPerSecond) })...)
	fmt.Fprintln(w)
	for _, note := range []string{
		"¹ gateway.TimeRoutes over the views the gateway reports, in the bench's process: a warm",
		"  ask, every device leased but the last worker's last.",
		"² agent → gateway (unix socket) → simulated worker (uplink) → agent: lease.request sent",
		"  to grant read, an idle ready device.",
		"³ the same request to one simulated worker on its own unix socket.",
		"⁴ WebSocket ping → pong on one worker's uplink, one after each warm grant through the gateway.",
		"⁵ requests that left the gateway's line (its status counts) over a window in which the",
		"  workers end leases (as expiries) at the rate below; every device leased at its start.",
		"⁶ gateway RSS with the workers connected and their views read, minus before, over N;",
		"  per waiting request likewise.",
		"⁷ the gateway restarted; from its port accepting to every worker listed connected.",
		"⁸ queue.changed events the workers push, 10,000 a second between them, each within its",
		"  relay burst, counted by a subscriber of the gateway from the first to the last.",
	} {
		fmt.Fprintln(w, note)
	}
	fmt.Fprintln(w)
}

// RenderFleetMarkdown is the fleet table as docs/PERFORMANCE.md embeds it.
func RenderFleetMarkdown(w io.Writer, res FleetResult) {
	fmt.Fprintln(w, "```text")
	RenderFleetTable(w, res)
	fmt.Fprintln(w, "```")
}

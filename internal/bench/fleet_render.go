package bench

import (
	"fmt"
	"io"
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

// RenderFleetMarkdown is the fleet table as docs/PERFORMANCE.md embeds it.
func RenderFleetMarkdown(w io.Writer, res FleetResult) {
	fmt.Fprintln(w, "```text")
	RenderFleetTable(w, res)
	fmt.Fprintln(w, "```")
}

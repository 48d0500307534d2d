package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// statsCmd shows the usage figures of a window of the event log: requests,
// grants by source, rejections by reason and the wait and hold percentiles.
func statsCmd(env Env) *cobra.Command {
	admin := session{principal: "simlock-cli", admin: true, autostart: true}
	var since, until, bucket string
	cmd := &cobra.Command{
		Use:   "stats [--since 24h] [--until 1h] [--bucket 1m|5m|15m|1h|6h|1d]",
		Short: "Show usage figures: leases asked for and granted, waits and holds, rejections by reason (admin)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now().UnixMilli()
			from, err := contract.ParseUsageTime("since", since, now)
			if err != nil {
				return inFlagTerms(fail(err), map[string][2]string{"since": {"--since", since}})
			}
			// To is set here, so --since 1h is the last hour (to whole
			// minutes, as every window is).
			in := contract.UsageGetInput{From: from, To: now, Bucket: bucket}
			if until != "" {
				if in.To, err = contract.ParseUsageTime("until", until, now); err != nil {
					return inFlagTerms(fail(err), map[string][2]string{"until": {"--until", until}})
				}
			}
			if _, _, _, err := in.Window(now); err != nil {
				return inFlagTerms(fail(err), map[string][2]string{"from": {"--since", since}, "to": {"--until", until}, "bucket": {"--bucket", bucket}})
			}
			return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
				var res contract.UsageResult
				if err := c.Call(ctx, contract.OpUsageGet, in, &res); err != nil {
					return err
				}
				if !jsonOut(cmd, env) {
					renderUsage(env.Stdout, res, time.Local)
					return nil
				}
				return printJSON(env.Stdout, res)
			})
		},
	}
	cmd.Flags().StringVar(&since, "since", "24h", "the window starts this long ago (24h, 90m, 7d; at most 90d) or at this epoch ms")
	cmd.Flags().StringVar(&until, "until", "", "the window ends this long ago, or at this epoch ms (default: now)")
	cmd.Flags().StringVar(&bucket, "bucket", "", "the series step: 1m, 5m, 15m, 1h, 6h or 1d (default: the smallest giving at most 200 points)")
	return cmd
}

// renderUsage writes the figures as a person reads them: totals, then the
// percentiles per platform, then a sparkline of requests per bucket. Times
// are shown in loc.
func renderUsage(w io.Writer, res contract.UsageResult, loc *time.Location) {
	from, to := time.UnixMilli(res.From).In(loc), time.UnixMilli(res.To).In(loc)
	fmt.Fprintf(w, "Usage %s – %s (bucket %s)\n", from.Format("2006-01-02 15:04"), to.Format("2006-01-02 15:04"), res.Bucket)
	if res.Partial {
		fmt.Fprintf(w, "Partial: the event log keeps events from %s on\n", time.UnixMilli(res.CoversFrom).In(loc).Format("2006-01-02 15:04"))
	}
	t := res.Totals
	fmt.Fprintf(w, "Requests %d  granted %s  rejected %s  cancelled %d  timed out %d\n",
		t.Requests, counts(t.Granted), counts(t.Rejected), t.Cancelled, t.TimedOut)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PLATFORM\tREQUESTS\tWAIT p50/p90/p99\tTO DEVICE p50/p90\tHOLD p50/p90\tTURNAROUND p50/p90")
	row := func(name string, f contract.UsageFigures) {
		p := f.Percentiles
		fmt.Fprintf(tw, "%s\t%d\t%s/%s/%s\t%s/%s\t%s/%s\t%s/%s\n", name, f.Totals.Requests,
			ms(p.Wait.P50, p.Wait.Count), ms(p.Wait.P90, p.Wait.Count), ms(p.Wait.P99, p.Wait.Count),
			ms(p.TimeToDevice.P50, p.TimeToDevice.Count), ms(p.TimeToDevice.P90, p.TimeToDevice.Count),
			ms(p.Hold.P50, p.Hold.Count), ms(p.Hold.P90, p.Hold.Count),
			ms(p.Turnaround.P50, p.Turnaround.Count), ms(p.Turnaround.P90, p.Turnaround.Count))
	}
	row("all", res.UsageFigures)
	for _, name := range slices.Sorted(maps.Keys(res.ByPlatform)) {
		row(name, res.ByPlatform[name])
	}
	for _, id := range slices.Sorted(maps.Keys(res.ByWorker)) {
		row("worker "+id, res.ByWorker[id])
	}
	tw.Flush()
	if len(res.Series) > 0 {
		fmt.Fprintf(w, "\nRequests per %s: %s\n", res.Bucket, sparkline(res.Series))
	}
}

// counts writes {a: 1, b: 2} as "1 (a 1, b 2)", keys sorted.
func counts(m map[string]int) string {
	n := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		n += m[k]
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", n, strings.Join(parts, ", "))
}

// ms writes a duration in ms for a table cell; "-" when nothing was measured.
func ms(v int64, n int) string {
	if n == 0 {
		return "-"
	}
	return (time.Duration(v) * time.Millisecond).Round(10 * time.Millisecond).String()
}

// sparkline draws requests per point with ▁ to █, scaled to the busiest.
func sparkline(series []contract.UsagePoint) string {
	const bars = "▁▂▃▄▅▆▇█"
	levels := []rune(bars)
	top := 0
	for _, p := range series {
		top = max(top, p.Requests)
	}
	var b strings.Builder
	for _, p := range series {
		i := 0
		if top > 0 {
			i = p.Requests * (len(levels) - 1) / top
		}
		b.WriteRune(levels[i])
	}
	return b.String()
}

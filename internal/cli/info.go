package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/apiclient"
	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

func statusCmd(env Env) *cobra.Command {
	var summary bool
	cmd := &cobra.Command{
		Use:   "status [--json] [--summary]",
		Short: "Show the daemon, capacity, devices, leases and the queue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, _ := cmd.Flags().GetBool("json")
			// As admin where the credential is at hand: an operator's status
			// lists every lease and request, an agent's only its own.
			return withAgent(cmd, env, session{principal: agentID("", env.Getenv, env.PPID), admin: true, autostart: true}, func(ctx context.Context, c agentAPI) error {
				// A daemon still starting (another command started it a
				// moment ago) is waited for, as one this command starts is.
				ctx, cancel := context.WithTimeout(ctx, startupBound)
				defer cancel()
				s, err := c.StatusWith(ctx, contract.StatusGetInput{Summary: summary, WaitReady: true})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(env.Stdout, s)
				}
				renderStatus(env.Stdout, s, time.Now(), summary)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&summary, "summary", false, "counts instead of the device, lease and request lists (constant time, whatever the fleet's size)")
	return cmd
}

// renderStatus is the human status view; a summary gives counts where the
// full view lists.
func renderStatus(w io.Writer, s contract.Status, now time.Time, summary bool) {
	fmt.Fprintf(w, "Daemon: %s (pid %d, version %s, protocol %d-%d)\n", s.Daemon.Health, s.Daemon.PID, s.Daemon.Version,
		s.Daemon.Protocol.Min, s.Daemon.Protocol.Max)
	fmt.Fprintf(w, "Home: %s\n", s.Daemon.Home)
	osName := ""
	if s.Host.OSVersion != "" {
		osName = " (" + s.Host.OSVersion + ")"
	}
	fmt.Fprintf(w, "Host: %s/%s%s, %d CPUs, %s RAM\n", s.Host.OS, s.Host.Arch, osName, s.Host.CPUs, bytesHuman(s.Host.RAMBytes))
	if s.Daemon.Mode == contract.ModeGateway {
		fmt.Fprintln(w, "Mode: gateway")
	}
	if l := s.Leadership; l != nil {
		fmt.Fprintln(w, leadershipLine(*l, now.Location()))
	}
	if s.Daemon.Health == "starting" {
		return
	}
	if f := s.Fleet; f != nil {
		line := fmt.Sprintf("Workers: %d connected, %d disconnected, %d incompatible", f.Connected, f.Disconnected, f.Incompatible)
		if f.Drained > 0 {
			line += fmt.Sprintf(" (%d drained)", f.Drained)
		}
		fmt.Fprintln(w, line)
		for _, x := range f.Workers {
			state := string(x.Connection)
			if x.Drained {
				state += ", drained"
			}
			if x.Reason != "" && x.Connection != contract.WorkerConnected {
				state += ": " + x.Reason
			}
			fmt.Fprintf(w, "  %s (%s): %s, %d/%d running, %d leases\n", x.ID, x.Label, state, x.Running, x.MaxRunning, x.Leases)
		}
	}
	for _, d := range s.Drivers {
		if d.Enabled {
			fmt.Fprintf(w, "Driver %s: %s%s\n", d.Platform, d.Driver, toolsLine(d.Tools))
		} else {
			fmt.Fprintf(w, "Driver %s: none (%s)\n", d.Platform, d.Reason)
		}
	}
	if c := s.Capacity; c != nil {
		fmt.Fprintf(w, "Capacity (%s): %d/%d running, %d starting, %d warm\n", c.Strategy, c.Global.Running, c.Global.MaxRunning, c.Global.Reserved, c.Global.Warm)
		for _, p := range contract.Platforms() {
			pc := c.Platforms[p]
			fmt.Fprintf(w, "  %s: %d/%d running, %d starting, %d/%d devices, %d warm\n", p, pc.Running, pc.MaxRunning, pc.Reserved, pc.Devices, pc.MaxDevices, pc.Warm)
		}
		if r := c.RAMBudget; r != nil {
			fmt.Fprintf(w, "  RAM budget: %s of %s\n", bytesHuman(r.UsedBytes), bytesHuman(r.LimitBytes))
		}
	}
	if summary && s.Counts != nil {
		renderCounts(w, s)
	} else {
		renderLists(w, s, now)
	}
	renderInstallsAndPool(w, s, now)
	if l := s.EventLog; l != nil {
		oldest := ""
		if l.Events > 0 {
			oldest = ", oldest " + roundDur(now.Sub(time.UnixMilli(l.OldestTs))) + " ago"
		}
		fmt.Fprintf(w, "Event log: %d events%s; keeps %d days, at most %d; %d pruned since start\n",
			l.Events, oldest, l.RetentionDays, l.MaxEvents, l.PrunedTotal)
	}
}

// toolsLine is " (xcode 26.1 17B55, …)" for the tools a driver reported,
// "" for none.
func toolsLine(ts []contract.ToolVersion) string {
	if len(ts) == 0 {
		return ""
	}
	parts := make([]string, 0, len(ts))
	for _, t := range ts {
		parts = append(parts, strings.TrimSpace(t.Name+" "+t.Version+" "+t.Build))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// renderCounts is the summary's middle: how many devices by state, leases
// and open requests.
func renderCounts(w io.Writer, s contract.Status) {
	c := s.Counts
	var states []string
	for _, st := range []contract.DeviceState{contract.DeviceProvisioning, contract.DeviceReady, contract.DeviceLeased,
		contract.DeviceReclaiming, contract.DeviceShutdown, contract.DeviceQuarantined} {
		if n := c.DevicesByState[st]; n > 0 {
			states = append(states, fmt.Sprintf("%d %s", n, st))
		}
	}
	line := fmt.Sprintf("Devices: %d", c.Devices)
	if len(states) > 0 {
		line += " (" + strings.Join(states, ", ") + ")"
	}
	fmt.Fprintln(w, line)
	fmt.Fprintf(w, "Leases: %d\n", c.Leases)
	fmt.Fprintf(w, "Queue: %d waiting, %d open requests\n", s.QueueDepth, c.Waiting)
}

// renderLists is the full view's middle: every device, lease and open
// request.
func renderLists(w io.Writer, s contract.Status, now time.Time) {
	fmt.Fprintf(w, "Devices: %d\n", len(s.Devices))
	for _, d := range s.Devices {
		lease := ""
		if d.LeaseID != "" {
			lease = ", lease " + d.LeaseID
		}
		stalled := ""
		if d.Stalled {
			stalled = " (stalled)"
		}
		fmt.Fprintf(w, "  %s %s %s %s: %s for %s%s%s\n", d.ID, d.Spec.Platform, d.Spec.Model, d.Spec.OSVersion, d.State,
			roundDur(now.Sub(time.UnixMilli(d.StateSince))), stalled, lease)
	}
	fmt.Fprintf(w, "Leases: %d\n", len(s.Leases))
	for _, l := range s.Leases {
		fmt.Fprintf(w, "  %s: %s on %s, since %s, renewed %s ago, expires in %s\n", l.ID, l.RequesterID, l.DeviceID,
			time.UnixMilli(l.GrantedAt).UTC().Format(time.RFC3339), roundDur(now.Sub(time.UnixMilli(l.LastRenewedAt))),
			roundDur(time.UnixMilli(l.TTLDeadline).Sub(now)))
	}
	fmt.Fprintf(w, "Queue: %d waiting\n", s.QueueDepth)
	for _, r := range s.Waiting {
		what := r.Spec.Model
		if what == "" {
			what = string(r.Spec.Class)
		}
		if what == "" {
			what = "phone"
		}
		place := r.Stage
		if r.Stage == "queued" {
			place = fmt.Sprintf("queued at %d", r.QueuePosition)
		}
		spec := strings.TrimSpace(strings.Join([]string{string(r.Spec.Platform), what, r.Spec.OSVersion}, " "))
		fmt.Fprintf(w, "  %s: %s, %s, %s, waiting %s\n", r.RequestID, r.RequesterID, spec,
			place, roundDur(time.Duration(r.WaitingMs)*time.Millisecond))
	}
}

// renderInstallsAndPool is the end of either view: installs in progress
// and the warm pool.
func renderInstallsAndPool(w io.Writer, s contract.Status, now time.Time) {
	for _, in := range s.Installs {
		fmt.Fprintf(w, "Install %s\n", installLine(in, now))
	}
	if wp := s.WarmPool; wp != nil && (len(wp.Targets) > 0 || !wp.Enabled || wp.Rewarming > 0 || grantTotal(wp.Grants) > 0) {
		state := "on"
		switch {
		case !wp.Enabled:
			state = "off (idle ready devices are shut down)"
		case wp.RewarmReleased:
			state = "on, re-warms released devices"
			if wp.Rewarming > 0 {
				state += fmt.Sprintf(" (%d booting)", wp.Rewarming)
			}
		}
		fmt.Fprintf(w, "Warm pool: %s\n", state)
		for _, t := range wp.Targets {
			line := fmt.Sprintf("  %s %s", t.Platform, t.Model)
			if t.OSVersion != "" {
				line += " " + t.OSVersion
			}
			line += fmt.Sprintf(": %d/%d ready, %d booting", t.Ready, t.Count, t.Booting)
			if t.Short > 0 {
				line += fmt.Sprintf(", %d short", t.Short)
				if t.Reason != "" {
					line += " (" + t.Reason + ")"
				}
			}
			fmt.Fprintln(w, line)
		}
		if grantTotal(wp.Grants) > 0 {
			fmt.Fprintf(w, "  grants since start: %s\n", grantLine(wp.Grants))
			// Split by platform only when more than one had grants: with one,
			// the split repeats the total.
			var some []contract.Platform
			for _, p := range contract.Platforms() {
				if grantTotal(wp.GrantsByPlatform[p]) > 0 {
					some = append(some, p)
				}
			}
			for _, p := range some {
				if len(some) > 1 {
					fmt.Fprintf(w, "    %s: %s\n", p, grantLine(wp.GrantsByPlatform[p]))
				}
			}
		}
	}
}

func grantTotal(g contract.GrantCounts) int { return g.Warm + g.Booted + g.Provisioned }

// grantLine is "6 warm, 2 booted, 1 provisioned (67% warm)".
func grantLine(g contract.GrantCounts) string {
	return fmt.Sprintf("%d warm, %d booted, %d provisioned (%.0f%% warm)", g.Warm, g.Booted, g.Provisioned, g.WarmRate*100)
}

// installLine is one install in progress: "ios 26.4: downloading 41% for
// 42s, 2 waiters".
func installLine(in contract.InstallStatus, now time.Time) string {
	state := in.State
	if in.Percent != nil {
		state += fmt.Sprintf(" %d%%", *in.Percent)
	}
	waiters := fmt.Sprintf("%d waiters", in.Waiters)
	if in.Waiters == 1 {
		waiters = "1 waiter"
	}
	return fmt.Sprintf("%s %s: %s for %s, %s", in.Platform, in.Component, state, roundDur(now.Sub(time.UnixMilli(in.Since))), waiters)
}

func bytesHuman(b int64) string {
	const gib = 1 << 30
	if b >= gib {
		return fmt.Sprintf("%.1f GiB", float64(b)/gib)
	}
	return fmt.Sprintf("%d MiB", b>>20)
}

func listCmd(env Env) *cobra.Command {
	var devices, leases, requests, rules bool
	var limit int
	var after string
	cmd := &cobra.Command{
		Use:   "list [--devices|--leases|--requests|--rules] [--limit N [--after CURSOR]]",
		Short: "Print devices (default), leases or waiting requests as JSON (admin)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, b := range []bool{devices, leases, requests, rules} {
				if b {
					n++
				}
			}
			if n > 1 {
				return usage("give one of --devices, --leases, --requests, --rules")
			}
			if rules {
				return withClient(cmd, env, session{principal: agentID("", env.Getenv, env.PPID), autostart: true}, func(ctx context.Context, c *client.Client) error {
					var res contract.CleanupRulesResult
					if err := c.Call(ctx, contract.OpCleanupRules, contract.Empty{}, &res); err != nil {
						return err
					}
					if !jsonOut(cmd, env) {
						renderRulesTable(env.Stdout, res)
						return nil
					}
					return printJSON(env.Stdout, res)
				})
			}
			kind := contract.ListDevices
			switch {
			case leases:
				kind = contract.ListLeases
			case requests:
				kind = contract.ListRequests
			}
			in := contract.ListGetInput{Kind: kind, Limit: limit, After: after}
			if err := in.Validate(); err != nil {
				return usage("%s", contract.AsError(err).Message)
			}
			return withAgent(cmd, env, session{principal: agentID("", env.Getenv, env.PPID), admin: true, autostart: true}, func(ctx context.Context, c agentAPI) error {
				res, err := c.ListPage(ctx, in)
				if err != nil {
					return err
				}
				if !jsonOut(cmd, env) {
					now := time.Now()
					switch kind {
					case contract.ListLeases:
						renderLeasesTable(env.Stdout, res.Leases, now, termWidth(env))
					case contract.ListRequests:
						renderRequestsTable(env.Stdout, res.Requests, now)
					default:
						renderDevicesTable(env.Stdout, res.Devices, now)
					}
					if res.Next != "" {
						fmt.Fprintf(env.Stdout, "More: add --after %s for the next page\n", res.Next)
					}
					return nil
				}
				out := map[string]any{}
				switch kind {
				case contract.ListLeases:
					out["leases"] = nonNil(res.Leases)
				case contract.ListRequests:
					out["requests"] = nonNil(res.Requests)
				default:
					out["devices"] = nonNil(res.Devices)
				}
				if res.Next != "" {
					out["next"] = res.Next
				}
				return printJSON(env.Stdout, out)
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("at most this many records, oldest first (1-%d; 0: all); the output's next is the --after of the next page", contract.MaxListPage))
	cmd.Flags().StringVar(&after, "after", "", "start after this cursor (a previous page's next)")
	cmd.Flags().BoolVar(&devices, "devices", false, "devices (the default)")
	cmd.Flags().BoolVar(&leases, "leases", false, "active leases")
	cmd.Flags().BoolVar(&requests, "requests", false, "open lease requests")
	cmd.Flags().BoolVar(&rules, "rules", false, "the idle cleanup rules and whether the disk is short")
	return cmd
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func catalogCmd(env Env) *cobra.Command {
	var platform string
	cmd := &cobra.Command{
		Use:   "catalog [--platform ios|android] [--json]",
		Short: "Show the models and runtimes each platform offers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, _ := cmd.Flags().GetBool("json")
			in := contract.CatalogGetInput{Platform: contract.Platform(platform)}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			return withAgent(cmd, env, session{principal: agentID("", env.Getenv, env.PPID), autostart: true}, func(ctx context.Context, c agentAPI) error {
				res, err := c.Catalog(ctx, in.Platform)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(env.Stdout, res)
				}
				renderCatalog(env.Stdout, res)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&platform, "platform", "", "only this platform")
	_ = cmd.RegisterFlagCompletionFunc("platform", completePlatforms)
	return cmd
}

// renderCatalog is the human catalog: models grouped by class, and the
// runtimes that can be downloaded with how to get one.
func renderCatalog(w io.Writer, res contract.CatalogResult) {
	if len(res.Platforms) == 0 {
		fmt.Fprintln(w, "No platform is served: enable a driver (SIMLOCK_DRIVERS=demo for simulated devices).")
		return
	}
	for i, cat := range res.Platforms {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s (runtimes %s; default %s)\n", cat.Platform, strings.Join(cat.Runtimes, ", "), cat.DefaultRuntime)
		byClass := map[contract.DeviceClass][]string{}
		for _, m := range cat.Models {
			byClass[cat.ModelClasses[m]] = append(byClass[cat.ModelClasses[m]], m)
		}
		classes := make([]string, 0, len(byClass))
		for c := range byClass {
			classes = append(classes, string(c))
		}
		sort.Strings(classes)
		for _, c := range classes {
			models := byClass[contract.DeviceClass(c)]
			slices.Sort(models)
			fmt.Fprintf(w, "  %s: %s\n", c, strings.Join(models, ", "))
		}
		if line := imagesLine(cat.Images); line != "" {
			fmt.Fprintf(w, "  images: %s (lease --image-tag)\n", line)
		}
		if len(cat.Downloadable) > 0 {
			fmt.Fprintf(w, "  downloadable: %s (lease --allow-download, or simlock component install %s %s)\n",
				strings.Join(cat.Downloadable, ", "), cat.Platform, cat.Downloadable[0])
		}
	}
}

// imagesLine lists the installed system images by runtime, in the
// catalog's order, each runtime once with its tags: "36 google_apis,
// google_apis_playstore; 35 google_apis".
func imagesLine(images []contract.CatalogImage) string {
	var runtimes []string
	tags := map[string][]string{}
	for _, im := range images {
		if _, seen := tags[im.Runtime]; !seen {
			runtimes = append(runtimes, im.Runtime)
		}
		if !slices.Contains(tags[im.Runtime], im.Tag) {
			tags[im.Runtime] = append(tags[im.Runtime], im.Tag)
		}
	}
	parts := make([]string, 0, len(runtimes))
	for _, r := range runtimes {
		parts = append(parts, r+" "+strings.Join(tags[r], ", "))
	}
	return strings.Join(parts, "; ")
}

func eventsCmd(env Env) *cobra.Command {
	var follow bool
	var since string
	cmd := &cobra.Command{
		Use:   "events [--follow] [--since <duration>]",
		Short: "Print daemon events as JSON lines (admin)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := contract.EventsReplayInput{}
			if since != "" {
				d, err := parseDuration(since)
				if err != nil {
					return usage("--since: %v", err)
				}
				q.SinceTs = max(time.Now().Add(-d).UnixMilli(), 1)
			}
			s := session{principal: agentID("", env.Getenv, env.PPID), admin: true, autostart: true}
			return withAgent(cmd, env, s, func(ctx context.Context, c agentAPI) error {
				var again reopen
				if follow {
					again = reopenEvents(cmd, env, s, c)
				}
				return streamEvents(ctx, c, env.Stdout, env.Stderr, q, follow, again)
			})
		},
	}
	cmd.Flags().BoolVar(&follow, "follow", false, "keep printing new events")
	cmd.Flags().StringVar(&since, "since", "", "start this long ago (e.g. 10m); default: the most recent events")
	return cmd
}

// eventSource is what streamEvents needs of a client.
type eventSource interface {
	Subscribe(ctx context.Context) (<-chan contract.Event, int64, error)
	Replay(ctx context.Context, in contract.EventsReplayInput) ([]contract.Event, error)
}

// reopen gives a followed stream that ended a source to follow it from
// again, and what closes that source.
type reopen func(ctx context.Context) (eventSource, func(), error)

// followReconnect bounds how long a followed stream that ended waits for a
// daemon to answer again: a restart, an upgrade's re-execution, a gateway
// replica taking over from a leader that went (about a second).
const followReconnect = 30 * time.Second

// reopenEvents is how events --follow reaches its daemon again: through
// the same remote client (each subscription is a request of its own, sent
// to whichever replica leads), or a new session on the daemon's socket,
// never starting a daemon that was stopped.
func reopenEvents(cmd *cobra.Command, env Env, s session, c agentAPI) reopen {
	if src, ok := c.(*apiclient.Client); ok {
		return func(context.Context) (eventSource, func(), error) { return src, func() {}, nil }
	}
	s.autostart = false
	return func(ctx context.Context) (eventSource, func(), error) {
		nc, err := connect(ctx, cmd, env, s)
		if err != nil {
			return nil, nil, err
		}
		return nc, func() { nc.Close() }, nil
	}
}

// streamEvents prints history, then (with follow) live events, joined with
// no gap and no duplicate: it subscribes before it reads history, and prints
// a live event only if its seq is past the last one printed. When the live
// stream ends and again is set, it reaches the daemon again (for at most
// followReconnect) and joins the new stream the same way, from the last
// event printed, saying so on notes.
func streamEvents(ctx context.Context, c eventSource, w, notes io.Writer, q contract.EventsReplayInput, follow bool, again reopen) error {
	var live <-chan contract.Event
	if follow {
		var err error
		live, _, err = c.Subscribe(ctx)
		if err != nil {
			return err
		}
	}
	var last int64
	if err := replayAll(ctx, c, w, q, &last); err != nil || !follow {
		return err
	}
	closeSource := func() {}
	defer func() { closeSource() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-live:
			if ok {
				if ev.Seq <= last {
					continue
				}
				if err := printJSON(w, ev); err != nil {
					return err
				}
				last = ev.Seq
				continue
			}
			if again == nil {
				return contract.Errorf(contract.CodeDaemonConnectionLost, "the event stream ended")
			}
			fmt.Fprintf(notes, "simlock: the event stream ended after seq %d; reconnecting for up to %s\n", last, followReconnect)
			closeSource()
			src, closeSrc, next, err := resubscribe(ctx, again)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			c, live, closeSource = src, next, closeSrc
			if err := replayAll(ctx, c, w, contract.EventsReplayInput{AfterSeq: last, Limit: 1000}, &last); err != nil {
				return err
			}
			fmt.Fprintf(notes, "simlock: following again from seq %d\n", last)
		}
	}
}

// replayAll prints the history q selects, page by page, and moves last to
// the seq of the last event printed.
func replayAll(ctx context.Context, c eventSource, w io.Writer, q contract.EventsReplayInput, last *int64) error {
	for {
		evs, err := c.Replay(ctx, q)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Seq <= *last {
				continue
			}
			if err := printJSON(w, ev); err != nil {
				return err
			}
			*last = ev.Seq
		}
		// A page shorter than the limit is the end of history.
		if len(evs) < 1000 || q.SinceTs == 0 && q.AfterSeq == 0 {
			return nil
		}
		q = contract.EventsReplayInput{AfterSeq: *last, Limit: 1000}
	}
}

// resubscribe reaches the daemon again through again and subscribes,
// every quarter second until one attempt succeeds or followReconnect has
// passed.
func resubscribe(ctx context.Context, again reopen) (eventSource, func(), <-chan contract.Event, error) {
	deadline := time.Now().Add(followReconnect)
	for {
		src, closeSrc, live, err := subscribeBy(ctx, again, deadline)
		if err == nil {
			return src, closeSrc, live, nil
		}
		wait := min(250*time.Millisecond, time.Until(deadline))
		if wait <= 0 {
			return nil, nil, nil, contract.Errorf(contract.CodeDaemonConnectionLost,
				"the event stream ended and no daemon answered within %s: %v", followReconnect, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, nil, ctx.Err()
		case <-t.C:
		}
	}
}

// subscribeBy makes one attempt of resubscribe, given up at deadline. The
// subscription it makes lives on, until ctx ends or the close it returns
// is called.
func subscribeBy(ctx context.Context, again reopen, deadline time.Time) (eventSource, func(), <-chan contract.Event, error) {
	sub, stop := context.WithCancel(ctx)
	timer := time.AfterFunc(time.Until(deadline), stop)
	src, closeSrc, err := again(sub)
	var live <-chan contract.Event
	if err == nil {
		if live, _, err = src.Subscribe(sub); err != nil {
			closeSrc()
		}
	}
	if !timer.Stop() && err == nil {
		// The deadline came as it succeeded, and ended the subscription.
		closeSrc()
		err = context.DeadlineExceeded
	}
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return src, func() { stop(); closeSrc() }, live, nil
}

// leadershipLine is a gateway replica's line of who leads: itself (with
// since when, in loc), another replica, or none while a takeover is due.
func leadershipLine(l contract.Leadership, loc *time.Location) string {
	switch {
	case l.Role == contract.RoleLeader:
		line := fmt.Sprintf("Leader: %s (term %d", l.LeaderURL, l.Term)
		if l.Since > 0 {
			line += ", since " + time.UnixMilli(l.Since).In(loc).Format("15:04:05")
		}
		return line + ")"
	case l.LeaderURL != "":
		return fmt.Sprintf("Follower of %s (term %d); this replica is %s", l.LeaderURL, l.Term, l.Self)
	default:
		return fmt.Sprintf("Follower: no replica leads now (last term %d); this replica is %s", l.Term, l.Self)
	}
}

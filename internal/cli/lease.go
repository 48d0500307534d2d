package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/proctable"
)

// leaseFlags are the flags of simlock lease, as typed.
type leaseFlags struct {
	platform, device, class, osVersion, imageTag, mode, agent, progressMode string
	ttl, timeout, idempotencyKey, leaseID                                   string
	noWait, detach, exportEnv, allowDownload                                bool
	bindPID                                                                 int
}

func leaseCmd(env Env) *cobra.Command {
	var lf leaseFlags
	cmd := &cobra.Command{
		Use:   "lease --platform <ios|android> [flags]",
		Short: "Lease a device and hold it until exit (or --detach)",
		Long: `Lease a device. The grant goes to stdout: a short view on a terminal, one
JSON line when piped or with --json. Progress goes to stderr.

Without --detach the command holds the lease: it renews it every TTL/3 and
releases it when it exits, on SIGINT or SIGTERM, or when its parent process
exits. It exits 14 if the lease ends under it: expired, killed by an
operator, or released by another session.

With --bind-pid the daemon ends the lease when that process exits, with or
without --detach (held, the command then watches that process instead of
its parent, and exits 0 when it goes).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A refusal of an input is said in the terms of its flag
			// (inCommandFlags, for every command).
			return lf.run(cmd, env)
		},
	}
	f := cmd.Flags()
	f.StringVar(&lf.platform, "platform", "", "ios or android (required)")
	f.StringVar(&lf.device, "device", "", "exact model, e.g. \"iPhone 17\" (default: the platform's phone)")
	f.StringVar(&lf.class, "class", "", "phone, tablet, watch, tv, vision, auto or desktop")
	f.StringVar(&lf.osVersion, "os", "", "OS version, e.g. 26.1, or a major such as 18")
	f.StringVar(&lf.imageTag, "image-tag", "", "Android system image tag, e.g. google_apis_playstore (1-64 ASCII letters, digits, _ and -; default: any installed image)")
	f.StringVar(&lf.mode, "mode", "", "slim or full: slim (iOS 18.5+) runs without background services, best effort; full is guaranteed (default: ios.defaultMode)")
	f.StringVar(&lf.ttl, "ttl", "", "lease lifetime between renewals (default lease.defaultTtlMs)")
	f.StringVar(&lf.timeout, "timeout", "", "give up waiting in the queue after this long (exit 10); 0 or unset waits until interrupted")
	f.BoolVar(&lf.noWait, "no-wait", false, "fail at once with NO_CAPACITY (exit 11) instead of queueing")
	f.BoolVar(&lf.allowDownload, "allow-download", false, "download the OS runtime if it is not installed (10-20 min; within downloads.policy); progress shows a downloading stage")
	f.BoolVar(&lf.detach, "detach", false, "print the grant and exit; the lease lives until released or its TTL passes")
	f.BoolVar(&lf.exportEnv, "export-env", false, "print the lease's environment as shell export lines instead of the grant JSON")
	f.StringVar(&lf.agent, "agent-id", "", "requester id (default: SIMLOCK_AGENT_ID, CLAUDE_CODE_SESSION_ID, CODEX_THREAD_ID, parent pid)")
	f.IntVar(&lf.bindPID, "bind-pid", 0, "end the lease when this local process exits (the daemon watches it; with or without --detach)")
	f.StringVar(&lf.progressMode, "progress", "", "json, human or none (default: human on a terminal, else json)")
	f.StringVar(&lf.leaseID, "lease-id", "", "the id the lease is to have (1-64 ASCII letters, digits, _ and -); LEASE_ID_TAKEN (exit 13) while another active lease or waiting request has it")
	f.StringVar(&lf.idempotencyKey, "idempotency-key", "", "up to 256 letters, digits and ._:@/+=-: a repeat with the same key joins the open request, or gets its stored answer, instead of asking again (a different spec is IDEMPOTENCY_CONFLICT)")
	_ = cmd.RegisterFlagCompletionFunc("platform", completePlatforms)
	_ = cmd.RegisterFlagCompletionFunc("class", completeClasses)
	_ = cmd.RegisterFlagCompletionFunc("device", completeCatalog(env, false))
	_ = cmd.RegisterFlagCompletionFunc("os", completeCatalog(env, true))
	cmd.AddCommand(renewCmd(env), leaseCancelCmd(env), leaseListCmd(env))
	return cmd
}

func (lf *leaseFlags) run(cmd *cobra.Command, env Env) error {
	in := contract.LeaseRequestInput{
		Platform: contract.Platform(lf.platform), Model: lf.device, Class: contract.DeviceClass(lf.class),
		OSVersion: lf.osVersion, ImageTag: lf.imageTag, Mode: contract.DeviceMode(lf.mode), NoWait: lf.noWait, AllowDownload: lf.allowDownload, IdempotencyKey: lf.idempotencyKey,
		LeaseID: lf.leaseID,
	}
	if lf.ttl != "" {
		d, err := durationFlag("--ttl", lf.ttl, false)
		if err != nil {
			return err
		}
		// Below a millisecond is still a TTL, refused by the daemon's
		// lease.minTtlMs as every other short one (0 would be the default).
		in.TTLMs = max(d.Milliseconds(), 1)
	}
	if lf.timeout != "" {
		d, err := durationFlag("--timeout", lf.timeout, true)
		if err != nil {
			return err
		}
		if d > 0 {
			// Below a millisecond still bounds the wait.
			in.TimeoutMs = max(d.Milliseconds(), 1)
		}
	}
	if err := in.Validate(); err != nil {
		return fail(err)
	}
	if cmd.Flags().Changed("bind-pid") {
		if err := contract.CheckPID(lf.bindPID); err != nil {
			return usage("--bind-pid %s", strings.TrimPrefix(err.(*contract.Error).Message, "pid: "))
		}
		// Asked before the request, not at the bind after the grant: a
		// pid with no process would have a device started and a lease
		// granted only to give it back. The daemon checks again at the
		// bind (the process may exit in between); it runs on this machine.
		if _, err := (proctable.Table{}).StartedAt(lf.bindPID); err != nil {
			return fail(contract.BadRequest("pid", "no process %d is running", lf.bindPID))
		}
	}
	mode, err := progressModeFor(lf.progressMode, cmd, env)
	if err != nil {
		return err
	}
	id := agentID(lf.agent, env.Getenv, env.PPID)
	return runLease(cmd.Context(), cmd, env, id, in, mode, lf.detach, lf.exportEnv, lf.bindPID)
}

func progressModeFor(flag string, cmd *cobra.Command, env Env) (string, error) {
	switch flag {
	case "json", "human", "none":
		return flag, nil
	case "":
		if asJSON, _ := cmd.Flags().GetBool("json"); env.StderrIsTerminal && !asJSON {
			return "human", nil
		}
		return "json", nil
	}
	return "", usage("--progress must be json, human or none, got %q", flag)
}

func runLease(ctx context.Context, cmd *cobra.Command, env Env, id string, in contract.LeaseRequestInput, mode string, detach, exportEnv bool, bindPID int) error {
	if rc, ok, err := remoteClient(env); err != nil || ok {
		if err != nil {
			return fail(err)
		}
		defer rc.Close()
		return runRemoteLease(ctx, cmd, env, rc, in, mode, detach, exportEnv, bindPID)
	}
	c, err := connect(ctx, cmd, env, session{principal: id, autostart: true})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	grant, err := requestWithProgress(ctx, env, c, in, mode)
	if err != nil {
		return err
	}
	if bindPID != 0 {
		bound, err := c.Bind(ctx, grant.Lease.ID, bindPID)
		if err != nil {
			// Unbound, the lease would outlive the process it was asked
			// to end with: give it back rather than hand it out.
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = c.Release(rctx, grant.Lease.ID)
			cancel()
			return fail(err)
		}
		grant.Lease = bound
	}
	if err := showGrant(cmd, env, grant, c.Hello().Role, mode, detach, exportEnv); err != nil {
		return err
	}
	if detach {
		return nil
	}
	redial := func(ctx context.Context) (*client.Client, error) {
		// The daemon was stopped or restarted on purpose: wait for it to
		// come back rather than start one.
		return connect(ctx, cmd, env, session{principal: id})
	}
	return hold(ctx, c, redial, env, grant.Lease, mode == "human")
}

// showGrant prints a grant: export lines, the human view, or its JSON with
// the caller's role; progress in human mode also says it on stderr.
func showGrant(cmd *cobra.Command, env Env, grant contract.LeaseGrant, role contract.Role, mode string, detach, exportEnv bool) error {
	out := struct {
		contract.LeaseGrant
		Role contract.Role `json:"role"`
	}{grant, role}
	humanView := !exportEnv && !jsonOut(cmd, env)
	switch {
	case exportEnv:
		lines := exportLines(grant.Environment)
		if lines == "" {
			fmt.Fprintln(env.Stderr, "note: this lease's driver sets no environment; nothing to export")
		}
		fmt.Fprint(env.Stdout, lines)
	case humanView:
		renderGrant(env.Stdout, grant, detach, termWidth(env))
	default:
		if err := printJSON(env.Stdout, out); err != nil {
			return fail(err)
		}
	}
	if mode == "human" && !humanView {
		// The grant's own view already says it on the terminal.
		fmt.Fprintln(env.Stderr, grantHuman(grant, detach))
	}
	return nil
}

// exportLines renders an environment as POSIX shell export lines, sorted,
// each value single-quoted so the shell takes it literally.
func exportLines(vars map[string]string) string {
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s='%s'\n", k, strings.ReplaceAll(vars[k], "'", `'\''`))
	}
	return b.String()
}

// grantHuman is the line a person sees when the grant arrives.
func grantHuman(g contract.LeaseGrant, detach bool) string {
	held := "held here; Ctrl-C releases it"
	if detach {
		held = "detached; it lasts until released or " + time.UnixMilli(g.Lease.TTLDeadline).UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("✓ Leased %s %s (%s) as %s on %s, %s", g.Device.Spec.Platform, g.Device.Spec.Model,
		g.Device.Spec.OSVersion, g.Lease.ID, g.Device.ID, held)
}

// hold keeps a lease alive until the command is told to stop, then releases
// it. It returns exit 14 when the daemon ends the lease. When the
// connection to the daemon is lost (the daemon stopped or restarted), it
// says so and reconnects with redial, as long as the lease can still be
// alive, then watches and renews it over the new session: the lease
// survives a daemon restart, and so does its holder.
//
// With human, what happens to the lease is said in sentences (the lease
// lost, the daemon gone and back, the release at exit); else as JSON lines.
func hold(ctx context.Context, c *client.Client, redial func(context.Context) (*client.Client, error), env Env, lease contract.LeaseRecord, human bool) error {
	say := sayer(env, human)
	// A lease bound to a process ends when the daemon sees that process
	// exit: the binding replaces the watch on this command's parent.
	parent := time.NewTicker(time.Second)
	defer parent.Stop()
	ppid := os.Getppid()
	if lease.BoundPID != 0 {
		parent.Stop()
	}
	link := &holdLink{c: c, deadline: lease.TTLDeadline}
	connect := func(ctx context.Context) (*client.Client, error) {
		if c := link.current(); c != nil {
			return c, nil
		}
		return nil, contract.Errorf(contract.CodeDaemonConnectionLost, "reconnecting")
	}
	kctx, stopKeeping := context.WithCancel(ctx)
	defer stopKeeping()
	kept := make(chan error, 1)
	risky := make(chan riskNote, 8)
	risk := client.NewRisk(lease)
	go func() {
		kept <- client.Hold(kctx, lease, connect, func(rec contract.LeaseRecord, err error) {
			link.renewed(rec, err)
			if err != nil && link.current() == nil {
				// The daemon is gone: the loop says so, and reconnects.
				return
			}
			if ch := risk.Note(time.Now(), rec, err); ch != client.RiskNone {
				select {
				case risky <- riskNote{change: ch, line: risk.AtRiskLine(), since: risk.Since(), expires: risk.ExpiresAt(), err: err}:
				default: // the loop is behind; the next change is told
				}
			}
		})
	}()
	// release stops the renewals (waiting for one in flight), then ends
	// the lease; kept is read once, here or below.
	keeperDone := false
	release := func() error {
		stopKeeping()
		if !keeperDone {
			<-kept
		}
		c := link.current()
		if c == nil {
			return fail(contract.Errorf(contract.CodeDaemonConnectionLost,
				"could not release lease %s: the daemon is not reachable; it ends at %s unless renewed",
				lease.ID, time.UnixMilli(link.lastDeadline()).UTC().Format(time.RFC3339)).With("leaseId", lease.ID))
		}
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.Release(rctx, lease.ID)
		var ce *contract.Error
		if errors.As(err, &ce) && ce.Code == contract.CodeUnknownLease {
			return nil
		}
		if err == nil && human {
			fmt.Fprintf(env.Stderr, "✓ Released lease %s; its device is cleaned for the next agent\n", lease.ID)
		}
		return fail(err)
	}
	lost := func(reason string) error {
		if reason == contract.ReasonBoundProcessExited {
			say(fmt.Sprintf("✓ Process %d exited, so lease %s was released; its device is cleaned for the next agent", lease.BoundPID, lease.ID),
				map[string]any{"push": contract.PushLeaseLost, "leaseId": lease.ID, "deviceId": lease.DeviceID, "reason": reason})
			return nil
		}
		say(fmt.Sprintf("✗ Lease %s on %s ended under this command: %s", lease.ID, lease.DeviceID, lostWords(reason)),
			map[string]any{"push": contract.PushLeaseLost, "leaseId": lease.ID, "deviceId": lease.DeviceID, "reason": reason})
		return &exitError{code: contract.ExitLeaseLost, err: fmt.Errorf("lease lost: %s", reason), quiet: true}
	}
	defer link.drop()
	var retry <-chan time.Time // ticks while reconnecting
	var retryTicker *time.Ticker
	defer func() {
		if retryTicker != nil {
			retryTicker.Stop()
		}
	}()
	for {
		cur := link.current()
		var pushes <-chan contract.Inbound
		var gone <-chan struct{}
		if cur != nil {
			pushes, gone = cur.LeaseLost(), cur.Done()
		}
		select {
		case <-ctx.Done():
			return release()
		case <-parent.C:
			if os.Getppid() != ppid {
				return release()
			}
		case p := <-pushes:
			if p.LeaseID != lease.ID {
				continue
			}
			switch p.Push {
			case contract.PushDeviceUnhealthy:
				say(fmt.Sprintf("! Device %s stopped answering; simlock is booting it again under lease %s", lease.DeviceID, lease.ID),
					map[string]any{"push": p.Push, "leaseId": lease.ID, "deviceId": lease.DeviceID})
			case contract.PushDeviceRecovered:
				say(fmt.Sprintf("✓ Device %s runs again (%d attempts); lease %s is still yours", lease.DeviceID, p.Attempts, lease.ID),
					map[string]any{"push": p.Push, "leaseId": lease.ID, "deviceId": lease.DeviceID, "attempts": p.Attempts})
			default:
				return lost(p.Reason)
			}
		case n := <-risky:
			sayRisk(say, lease.ID, n)
		case <-gone:
			link.drop()
			until := time.UnixMilli(link.lastDeadline()).UTC().Format(time.RFC3339)
			if why, ok := cur.Stopping(); ok {
				by := "simlock daemon stop"
				if why == "signal" {
					by = "a signal"
				}
				msg := fmt.Sprintf("the daemon is stopping (%s); lease %s is kept: reconnecting until %s, when it ends unless renewed", by, lease.ID, until)
				say("! The daemon is stopping ("+by+"); lease "+lease.ID+" is kept, reconnecting until "+until,
					map[string]any{"notice": "daemon-stopping", "leaseId": lease.ID, "reason": why, "message": msg})
			} else {
				say(fmt.Sprintf("! The daemon went away; holding lease %s and reconnecting until %s, when it ends unless renewed", lease.ID, until),
					map[string]any{"notice": "daemon-connection-lost", "leaseId": lease.ID,
						"message": fmt.Sprintf("lost the daemon while holding lease %s; reconnecting until %s, when the lease ends unless renewed", lease.ID, until)})
			}
			if retryTicker != nil {
				retryTicker.Stop()
			}
			retryTicker = time.NewTicker(reconnectEvery)
			retry = retryTicker.C
		case <-retry:
			if time.Now().UnixMilli() >= link.lastDeadline() {
				return fail(contract.Errorf(contract.CodeDaemonConnectionLost,
					"lost the daemon while holding lease %s and it did not come back before the lease's end (%s)",
					lease.ID, time.UnixMilli(link.lastDeadline()).UTC().Format(time.RFC3339)).
					With("leaseId", lease.ID).With("ttlDeadline", link.lastDeadline()))
			}
			err := link.reconnect(ctx, redial, lease.ID)
			switch {
			case err == nil:
				retry = nil
				say("✓ Reconnected to the daemon; lease "+lease.ID+" is still held and renewed",
					map[string]any{"notice": "daemon-reconnected", "leaseId": lease.ID,
						"message": "reconnected to the daemon; lease " + lease.ID + " is still held and renewed"})
			case contract.AsError(err).Code == contract.CodeUnknownLease:
				return lost("unknown-lease")
			}
		case err := <-kept:
			keeperDone = true
			if errors.Is(err, client.ErrLeaseGone) {
				// The push that says why may have been missed; the daemon
				// no longer knows the lease, which is all we can say.
				return lost("unknown-lease")
			}
			return release()
		}
	}
}

// sayer writes a holder's notice: its sentence for a person, else its JSON.
func sayer(env Env, human bool) func(sentence string, fields map[string]any) {
	return func(sentence string, fields map[string]any) {
		if human {
			fmt.Fprintln(env.Stderr, sentence)
			return
		}
		_ = printJSON(env.Stderr, fields)
	}
}

// lostWords says why a lease ended, for a person.
func lostWords(reason string) string {
	switch reason {
	case string(contract.EndExpired):
		return "its TTL passed without a renewal"
	case string(contract.EndKilled):
		return "an operator ended it"
	case string(contract.EndDeviceLost):
		return "its device stopped and could not be booted again"
	case string(contract.EndReleased):
		return "another session released it"
	case "unknown-lease":
		return "the daemon no longer knows it"
	case contract.ReasonBoundProcessExited:
		return "the process it was bound to exited"
	}
	return reason
}

// reconnectEvery is how often a holder that lost the daemon tries to reach
// it again.
const reconnectEvery = 250 * time.Millisecond

// holdLink is a holder's session with the daemon, replaced when the daemon
// comes back after the connection was lost, and the lease's last known
// deadline.
type holdLink struct {
	mu       sync.Mutex
	c        *client.Client // nil while reconnecting
	deadline int64
}

func (l *holdLink) current() *client.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c
}

func (l *holdLink) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil {
		l.c.Close()
		l.c = nil
	}
}

// renewed notes a renewal's deadline; a failed one is tried again at the
// next tick, and a lost connection is handled by the holder's loop.
func (l *holdLink) renewed(rec contract.LeaseRecord, err error) {
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deadline = rec.TTLDeadline
}

func (l *holdLink) lastDeadline() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// reconnect dials the daemon again, asks to hear of the lease's end on the
// new session, and renews it at once (the renewals missed while the daemon
// was away may have left little of its TTL).
func (l *holdLink) reconnect(ctx context.Context, redial func(context.Context) (*client.Client, error), leaseID string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := redial(ctx)
	if err != nil {
		return err
	}
	var watched contract.LeaseWatchResult
	if err := c.Call(ctx, contract.OpLeaseWatch, contract.LeaseIDInput{LeaseID: leaseID}, &watched); err != nil {
		c.Close()
		return err
	}
	rec, err := c.Renew(ctx, leaseID, 0)
	if err != nil {
		c.Close()
		return err
	}
	l.mu.Lock()
	l.c, l.deadline = c, rec.TTLDeadline
	l.mu.Unlock()
	return nil
}

// progressPrinter shows progress on stderr as JSON lines, a live line, or
// not at all. The live line is cut to the terminal's width, so redrawing it
// never wraps; each step that ends leaves one line saying what it did and
// how long it took.
type progressPrinter struct {
	w      io.Writer
	mode   string
	device string     // what the request asks for, as the lines name it
	width  func() int // the terminal's columns; 0 when unknown

	mu sync.Mutex
	// mu guards the fields below.
	cur   *contract.LeaseProgress
	began time.Time // the first step: time in line counts from here
	since time.Time // the current step
	// rate follows the current download, for its speed and time left.
	rate    downloadRate
	frame   int
	done    chan struct{}
	drawn   bool
	stopped bool
}

func newProgressPrinter(w io.Writer, mode string, in contract.LeaseRequestInput, width func() int) *progressPrinter {
	if width == nil {
		width = func() int { return 0 }
	}
	p := &progressPrinter{w: w, mode: mode, device: wanted(in), width: width, done: make(chan struct{})}
	if mode == "human" {
		go p.animate()
	}
	return p
}

func (p *progressPrinter) show(prog contract.LeaseProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.mode {
	case "json":
		fmt.Fprintln(p.w, progressJSON(prog))
	case "human":
		now := time.Now()
		if p.began.IsZero() {
			p.began = now
		}
		if p.cur == nil || p.cur.Stage != prog.Stage || p.cur.Waiting != prog.Waiting {
			p.finishLocked(now)
			p.since = now
			p.rate = downloadRate{}
		}
		p.rate.see(prog.Percent, prog.BytesDone, now)
		p.cur = &prog
		p.drawLocked()
	}
}

// elapsedLocked is the time the live line counts: in line, since the
// request began (a download between two spells in line does not restart
// it); any other step, since the step began.
func (p *progressPrinter) elapsedLocked(now time.Time) time.Duration {
	if p.cur.Stage == contract.StageQueued {
		return now.Sub(p.began)
	}
	return now.Sub(p.since)
}

// finishLocked replaces the live line with the line the step that ended
// leaves behind.
func (p *progressPrinter) finishLocked(now time.Time) {
	if p.cur == nil {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[2K%s\n", fitWidth(progressDone(*p.cur, p.device, now.Sub(p.since)), p.width()))
	p.drawn = false
}

func (p *progressPrinter) drawLocked() {
	if p.cur == nil || p.stopped {
		return
	}
	now := time.Now()
	line := liveLine(*p.cur, p.device, p.elapsedLocked(now), now, p.frame, &p.rate, liveWidth(p.width()))
	fmt.Fprintf(p.w, "\r\x1b[2K%s", line)
	p.drawn = true
}

func (p *progressPrinter) animate() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			p.mu.Lock()
			p.frame++
			p.drawLocked()
			p.mu.Unlock()
		}
	}
}

// stop ends the live line: a request that got its device leaves the last
// step's line too; one that failed leaves nothing of it, for the error
// line that follows.
func (p *progressPrinter) stop(granted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	close(p.done)
	switch {
	case granted && p.cur != nil:
		p.finishLocked(time.Now())
	case p.drawn:
		fmt.Fprint(p.w, "\r\x1b[2K")
	}
}

func renewCmd(env Env) *cobra.Command {
	var ttl, agent string
	cmd := &cobra.Command{
		Use:               "renew <lease-id>",
		Short:             "Extend a lease's deadline; prints the lease record",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeLeaseIDs(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := contract.LeaseRenewInput{LeaseID: args[0]}
			if ttl != "" {
				d, err := durationFlag("--ttl", ttl, false)
				if err != nil {
					return err
				}
				in.TTLMs = max(d.Milliseconds(), 1)
			}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			return withAgent(cmd, env, session{principal: agentID(agent, env.Getenv, env.PPID), admin: true, autostart: true}, func(ctx context.Context, c agentAPI) error {
				rec, err := c.Renew(ctx, in.LeaseID, in.TTLMs)
				if err != nil {
					return err
				}
				return printResult(cmd, env, rec, func(w io.Writer) { renderRenewed(w, rec, time.Now()) })
			})
		},
	}
	cmd.Flags().StringVar(&ttl, "ttl", "", "new lifetime from now; also becomes the lease's width")
	cmd.Flags().StringVar(&agent, "agent-id", "", "requester id (see simlock lease --help)")
	return cmd
}

func releaseCmd(env Env) *cobra.Command {
	var all, yes bool
	var agent string
	cmd := &cobra.Command{
		Use:               "release <lease-id> | --all --yes",
		Short:             "End a lease; the device is cleaned in the background",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeLeaseIDs(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			s := session{principal: agentID(agent, env.Getenv, env.PPID), admin: true, autostart: true}
			if all {
				if len(args) > 0 {
					return usage("give a lease id or --all, not both")
				}
				if !yes {
					if !env.StdinIsTerminal {
						return usage("release --all ends every lease and cancels every waiting request; add --yes to confirm (no terminal to ask on)")
					}
					if !confirm(env, "This ends every lease and cancels every waiting request.") {
						return usage("release --all not confirmed")
					}
				}
				return withClient(cmd, env, s, func(ctx context.Context, c *client.Client) error {
					res, err := c.ReleaseAll(ctx)
					if err != nil {
						return err
					}
					return printResult(cmd, env, res, func(w io.Writer) { renderReleaseAll(w, res) })
				})
			}
			if len(args) == 0 {
				return usage("release needs a lease id, or --all --yes")
			}
			in := contract.LeaseIDInput{LeaseID: args[0]}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			return withAgent(cmd, env, s, func(ctx context.Context, c agentAPI) error {
				res, err := c.Release(ctx, in.LeaseID)
				if err != nil {
					return err
				}
				return printResult(cmd, env, res, func(w io.Writer) { renderRelease(w, res) })
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "end every lease and cancel every waiting request (admin)")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm --all")
	cmd.Flags().StringVar(&agent, "agent-id", "", "requester id (see simlock lease --help)")
	return cmd
}

// requestWithProgress asks c for a lease, drawing each step of the wait on
// stderr as mode says, over the socket and a remote profile alike. An
// interrupted wait is CANCELLED: the request is withdrawn (the socket's
// session closes, the HTTP client cancels it on its way out), and a
// device already being started is kept by the daemon.
func requestWithProgress(ctx context.Context, env Env, c agentAPI, in contract.LeaseRequestInput, mode string) (contract.LeaseGrant, error) {
	pr := newProgressPrinter(env.Stderr, mode, in, env.TermWidth)
	grant, err := c.RequestLease(ctx, in, pr.show)
	pr.stop(err == nil)
	if err != nil {
		if ctx.Err() != nil {
			return grant, fail(contract.Errorf(contract.CodeCancelled, "stopped waiting for a device"))
		}
		return grant, fail(err)
	}
	return grant, nil
}

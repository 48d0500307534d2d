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
)

func leaseCmd(env Env) *cobra.Command {
	var (
		platform, device, class, osVersion, agent, progressMode string
		ttl, timeout                                            string
		noWait, detach, exportEnv, allowDownload                bool
	)
	cmd := &cobra.Command{
		Use:   "lease --platform <ios|android> [flags]",
		Short: "Lease a device and hold it until exit (or --detach)",
		Long: `Lease a device. The grant is one JSON line on stdout; progress goes to stderr.

Without --detach the command holds the lease: it renews it every TTL/3 and
releases it when it exits, on SIGINT or SIGTERM, or when its parent process
exits. It exits 14 if the lease ends under it: expired, killed by an
operator, or released by another session.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := contract.LeaseRequestInput{
				Platform: contract.Platform(platform), Model: device, Class: contract.DeviceClass(class),
				OSVersion: osVersion, NoWait: noWait, AllowDownload: allowDownload,
			}
			if ttl != "" {
				d, err := parseDuration(ttl)
				if err != nil {
					return usage("--ttl: %v", err)
				}
				if d < time.Millisecond {
					return usage("--ttl must be at least 1ms")
				}
				in.TTLMs = d.Milliseconds()
			}
			if timeout != "" {
				d, err := parseDuration(timeout)
				if err != nil {
					return usage("--timeout: %v", err)
				}
				if d > 0 {
					// Below a millisecond still bounds the wait.
					in.TimeoutMs = max(d.Milliseconds(), 1)
				}
			}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			mode, err := progressModeFor(progressMode, env)
			if err != nil {
				return err
			}
			id := agentID(agent, env.Getenv, env.PPID)
			return runLease(cmd.Context(), cmd, env, id, in, mode, detach, exportEnv)
		},
	}
	f := cmd.Flags()
	f.StringVar(&platform, "platform", "", "ios or android (required)")
	f.StringVar(&device, "device", "", "exact model, e.g. \"iPhone 17\" (default: the platform's phone)")
	f.StringVar(&class, "class", "", "phone, tablet, watch, tv, vision, auto or desktop")
	f.StringVar(&osVersion, "os", "", "OS version, e.g. 26.1, or a major such as 18")
	f.StringVar(&ttl, "ttl", "", "lease lifetime between renewals (default lease.defaultTtlMs)")
	f.StringVar(&timeout, "timeout", "", "give up waiting in the queue after this long (exit 10); 0 or unset waits until interrupted")
	f.BoolVar(&noWait, "no-wait", false, "fail at once with NO_CAPACITY (exit 11) instead of queueing")
	f.BoolVar(&allowDownload, "allow-download", false, "download the OS runtime if it is not installed (10-20 min; within downloads.policy); progress shows a downloading stage")
	f.BoolVar(&detach, "detach", false, "print the grant and exit; the lease lives until released or its TTL passes")
	f.BoolVar(&exportEnv, "export-env", false, "print the lease's environment as shell export lines instead of the grant JSON")
	f.StringVar(&agent, "agent-id", "", "requester id (default: SIMLOCK_AGENT_ID, CLAUDE_CODE_SESSION_ID, CODEX_SESSION_ID, parent pid)")
	f.StringVar(&progressMode, "progress", "", "json, human or none (default: human on a terminal, else json)")
	cmd.AddCommand(renewCmd(env))
	return cmd
}

func progressModeFor(flag string, env Env) (string, error) {
	switch flag {
	case "json", "human", "none":
		return flag, nil
	case "":
		if env.StderrIsTerminal {
			return "human", nil
		}
		return "json", nil
	}
	return "", usage("--progress must be json, human or none, got %q", flag)
}

func runLease(ctx context.Context, cmd *cobra.Command, env Env, id string, in contract.LeaseRequestInput, mode string, detach, exportEnv bool) error {
	c, err := connect(ctx, cmd, env, session{principal: id, autostart: true})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	pr := newProgressPrinter(env.Stderr, mode)
	grant, err := c.RequestLease(ctx, in, pr.show)
	pr.stop()
	if err != nil {
		if ctx.Err() != nil {
			// Interrupted while waiting: closing the session withdraws the
			// request; a device already being started is kept by the daemon.
			return fail(contract.Errorf(contract.CodeCancelled, "stopped waiting for a device"))
		}
		return fail(err)
	}
	out := struct {
		contract.LeaseGrant
		Role contract.Role `json:"role"`
	}{grant, c.Hello().Role}
	if exportEnv {
		lines := exportLines(grant.Environment)
		if lines == "" {
			fmt.Fprintln(env.Stderr, "note: this lease's driver sets no environment; nothing to export")
		}
		fmt.Fprint(env.Stdout, lines)
	} else if err := printJSON(env.Stdout, out); err != nil {
		return fail(err)
	}
	if mode == "human" {
		fmt.Fprintln(env.Stderr, grantHuman(grant, detach))
	}
	if detach {
		return nil
	}
	redial := func(ctx context.Context) (*client.Client, error) {
		// The daemon was stopped or restarted on purpose: wait for it to
		// come back rather than start one.
		return connect(ctx, cmd, env, session{principal: id})
	}
	return hold(ctx, c, redial, env, grant.Lease)
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
func hold(ctx context.Context, c *client.Client, redial func(context.Context) (*client.Client, error), env Env, lease contract.LeaseRecord) error {
	parent := time.NewTicker(time.Second)
	defer parent.Stop()
	ppid := os.Getppid()
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
	go func() {
		kept <- client.Hold(kctx, lease, connect, link.renewed)
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
		return fail(err)
	}
	lost := func(reason string) error {
		_ = printJSON(env.Stderr, map[string]any{"push": contract.PushLeaseLost, "leaseId": lease.ID, "deviceId": lease.DeviceID, "reason": reason})
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
				_ = printJSON(env.Stderr, map[string]any{"push": p.Push, "leaseId": lease.ID, "deviceId": lease.DeviceID})
			case contract.PushDeviceRecovered:
				_ = printJSON(env.Stderr, map[string]any{"push": p.Push, "leaseId": lease.ID, "deviceId": lease.DeviceID, "attempts": p.Attempts})
			default:
				return lost(p.Reason)
			}
		case <-gone:
			link.drop()
			_ = printJSON(env.Stderr, map[string]any{"notice": "daemon-connection-lost", "leaseId": lease.ID,
				"message": fmt.Sprintf("lost the daemon while holding lease %s; reconnecting until %s, when the lease ends unless renewed",
					lease.ID, time.UnixMilli(link.lastDeadline()).UTC().Format(time.RFC3339))})
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
				_ = printJSON(env.Stderr, map[string]any{"notice": "daemon-reconnected", "leaseId": lease.ID,
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
// not at all.
type progressPrinter struct {
	w    io.Writer
	mode string

	mu sync.Mutex
	// mu guards the fields below.
	cur     *contract.LeaseProgress
	since   time.Time
	frame   int
	done    chan struct{}
	drawn   bool
	stopped bool
}

func newProgressPrinter(w io.Writer, mode string) *progressPrinter {
	p := &progressPrinter{w: w, mode: mode, done: make(chan struct{})}
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
		if p.cur == nil || p.cur.Stage != prog.Stage || p.cur.Waiting != prog.Waiting {
			p.since = time.Now()
		}
		p.cur = &prog
		p.drawLocked()
	}
}

func (p *progressPrinter) drawLocked() {
	if p.cur == nil || p.stopped {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[2K%s", progressHuman(*p.cur, time.Since(p.since), p.frame))
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

func (p *progressPrinter) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	close(p.done)
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[2K")
	}
}

func renewCmd(env Env) *cobra.Command {
	var ttl, agent string
	cmd := &cobra.Command{
		Use:   "renew <lease-id>",
		Short: "Extend a lease's deadline; prints the lease record",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := contract.LeaseRenewInput{LeaseID: args[0]}
			if ttl != "" {
				d, err := parseDuration(ttl)
				if err != nil {
					return usage("--ttl: %v", err)
				}
				in.TTLMs = max(d.Milliseconds(), 1)
			}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			return withClient(cmd, env, session{principal: agentID(agent, env.Getenv, env.PPID), admin: true, autostart: true}, func(ctx context.Context, c *client.Client) error {
				rec, err := c.Renew(ctx, in.LeaseID, in.TTLMs)
				if err != nil {
					return err
				}
				return printJSON(env.Stdout, rec)
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
		Use:   "release <lease-id> | --all --yes",
		Short: "End a lease; the device is cleaned in the background",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s := session{principal: agentID(agent, env.Getenv, env.PPID), admin: true, autostart: true}
			if all {
				if len(args) > 0 {
					return usage("give a lease id or --all, not both")
				}
				if !yes {
					return usage("release --all ends every lease and cancels every waiting request; add --yes to confirm")
				}
				return withClient(cmd, env, s, func(ctx context.Context, c *client.Client) error {
					res, err := c.ReleaseAll(ctx)
					if err != nil {
						return err
					}
					return printJSON(env.Stdout, res)
				})
			}
			if len(args) == 0 {
				return usage("release needs a lease id, or --all --yes")
			}
			in := contract.LeaseIDInput{LeaseID: args[0]}
			if err := in.Validate(); err != nil {
				return fail(err)
			}
			return withClient(cmd, env, s, func(ctx context.Context, c *client.Client) error {
				res, err := c.Release(ctx, in.LeaseID)
				if err != nil {
					return err
				}
				return printJSON(env.Stdout, res)
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "end every lease and cancel every waiting request (admin)")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm --all")
	cmd.Flags().StringVar(&agent, "agent-id", "", "requester id (see simlock lease --help)")
	return cmd
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
)

// benchDaemon is a `simlock daemon run` this bench started.
type benchDaemon struct {
	home string
	// startupReason reads what the daemon printed as why it died.
	startupReason func(out string) string
	cmd           *exec.Cmd
	exited        chan struct{} // closed once the process is reaped
}

func (d *benchDaemon) pid() int { return d.cmd.Process.Pid }

// startBenchDaemon execs the daemon for home, with an environment free of
// the caller's SIMLOCK_ settings. Its output goes to daemon.out.
func startBenchDaemon(env Env, home string) (*benchDaemon, error) {
	out, err := os.OpenFile(filepath.Join(home, "daemon.out"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bench: start daemon: %w", err)
	}
	cmd := exec.Command(env.Executable, "daemon", "run")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SIMLOCK_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "SIMLOCK_HOME="+home, "SIMLOCK_DRIVERS=demo")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, contract.Errorf(contract.CodeDaemonStartupFailed, "bench: start daemon: %v", err)
	}
	d := &benchDaemon{home: home, startupReason: env.StartupReason, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(d.exited)
	}()
	return d, nil
}

// startAndWait starts the daemon of home and returns it with an agent
// session once status.get says it runs with leases leases loaded.
func startAndWait(ctx context.Context, env Env, home string, leases int) (*benchDaemon, *client.Client, error) {
	d, err := startBenchDaemon(env, home)
	if err != nil {
		return nil, nil, err
	}
	c, err := d.waitRunning(ctx, leases)
	if err != nil {
		_ = d.stop(ctx)
		return nil, nil, err
	}
	return d, c, nil
}

// dial opens a session: the admin's (with the token the daemon wrote) or
// the agent's.
func (d *benchDaemon) dial(ctx context.Context, admin bool) (*client.Client, error) {
	hello := contract.HelloInput{Client: "simlock-bench", Principal: benchPrincipal}
	if admin {
		b, err := os.ReadFile(filepath.Join(d.home, daemon.AdminTokenName))
		if err != nil {
			return nil, err
		}
		hello.AdminToken = strings.TrimSpace(string(b))
	}
	cctx, cancel := context.WithTimeout(ctx, benchCallBound)
	defer cancel()
	return client.Dial(cctx, daemon.SocketPath(d.home), hello)
}

// waitRunning polls, within benchStartBound, until the daemon answers and
// status.get (waitReady, summary) says it runs with leases leases; it
// returns the agent session it asked with. (An admin session would need
// the token, which the daemon writes just after it listens.)
func (d *benchDaemon) waitRunning(ctx context.Context, leases int) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, benchStartBound)
	defer cancel()
	tick := time.NewTicker(benchPoll)
	defer tick.Stop()
	wait := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.exited:
			return contract.Errorf(contract.CodeDaemonStartupFailed, "bench: the daemon exited at startup: %s", d.lastWords())
		case <-tick.C:
			return nil
		}
	}
	var c *client.Client
	for c == nil {
		var err error
		if c, err = d.dial(ctx, false); err != nil {
			if !client.NotListening(err) {
				return nil, benchError("connect", err)
			}
			if err := wait(); err != nil {
				return nil, d.startError(err)
			}
		}
	}
	for {
		s, err := c.StatusWith(ctx, contract.StatusGetInput{WaitReady: true, Summary: true})
		switch {
		case err != nil:
			c.Close()
			return nil, d.startError(err)
		case s.Daemon.Health == "failed":
			c.Close()
			return nil, contract.Errorf(contract.CodeDaemonStartupFailed, "bench: the daemon's startup failed; see %s", filepath.Join(d.home, daemon.LogName))
		case s.Daemon.Health == "running" && leaseCount(s) == leases:
			return c, nil
		case s.Daemon.Health == "running":
			c.Close()
			return nil, contract.Errorf(contract.CodeInternal, "bench: the daemon started with %d leases, want %d", leaseCount(s), leases)
		}
		if err := wait(); err != nil {
			c.Close()
			return nil, d.startError(err)
		}
	}
}

func (d *benchDaemon) startError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return contract.Errorf(contract.CodeDaemonStartupFailed, "bench: the daemon did not run within %s; see %s", benchStartBound, filepath.Join(d.home, daemon.LogName))
	}
	var ce *contract.Error
	if errors.As(err, &ce) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return benchError("start", err)
}

// lastWords is what a daemon that died printed last.
func (d *benchDaemon) lastWords() string {
	b, _ := os.ReadFile(filepath.Join(d.home, "daemon.out"))
	return d.startupReason(string(b))
}

// leaseCount reads the lease count from a status, summary or not.
func leaseCount(s contract.Status) int {
	if s.Counts != nil {
		return s.Counts.Leases
	}
	return len(s.Leases)
}

// stop stops the daemon gracefully, killing it if it is not gone within
// benchStopBound. It runs on every exit path, so it does not use ctx's
// cancellation.
func (d *benchDaemon) stop(ctx context.Context) error {
	select {
	case <-d.exited:
		return nil
	default:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchStopBound)
	defer cancel()
	if c, err := d.dial(sctx, true); err == nil {
		_ = c.Stop(sctx)
		c.Close()
	}
	select {
	case <-d.exited:
		return nil
	case <-sctx.Done():
	}
	_ = d.cmd.Process.Kill()
	<-d.exited
	return contract.Errorf(contract.CodeInternal, "bench: the daemon did not stop within %s and was killed", benchStopBound)
}

// rssKiB is the resident set of process pid: VmRSS of /proc/<pid>/status
// on Linux, ps elsewhere (macOS).
func rssKiB(ctx context.Context, pid int) (int64, error) {
	if runtime.GOOS == "linux" {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0, fmt.Errorf("bench: read the daemon's RSS: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
		}
		return 0, errors.New("bench: no VmRSS in the daemon's /proc status")
	}
	cctx, cancel := context.WithTimeout(ctx, benchCallBound)
	defer cancel()
	out, err := exec.CommandContext(cctx, "ps", "-o", "rss=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return 0, fmt.Errorf("bench: ps -o rss= -p %d: %w", pid, err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}

// settledRSSKiB is the daemon's RSS once it has settled: read every
// rssEvery until rssQuiet reads in a row find none lower than the lowest
// so far, or rssBound has passed, the lowest. One read taken just after a
// burst of work reads the garbage of it too, which the runtime gives back
// only gradually, and by how much depends on when its last collection
// ran: a difference of two such reads can say little or even less than
// nothing.
func settledRSSKiB(ctx context.Context, pid int) (int64, error) {
	return settle(ctx, func(ctx context.Context) (int64, error) { return rssKiB(ctx, pid) }, rssEvery, rssQuiet, rssBound)
}

const (
	rssEvery = 100 * time.Millisecond
	rssQuiet = 5
	rssBound = 3 * time.Second
)

// settle reads until quiet reads in a row, every apart, find none lower
// than the lowest so far, or bound has passed; it returns the lowest.
func settle(ctx context.Context, read func(context.Context) (int64, error), every time.Duration, quiet int, bound time.Duration) (int64, error) {
	end := time.Now().Add(bound)
	low, err := read(ctx)
	if err != nil {
		return 0, err
	}
	for still := 0; still < quiet && time.Now().Before(end); {
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
		v, err := read(ctx)
		if err != nil {
			return 0, err
		}
		if v < low {
			low, still = v, 0
		} else {
			still++
		}
	}
	return low, nil
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/homedir"
)

// session describes how a command talks to the daemon.
type session struct {
	principal string
	// admin asks for the admin role when a credential can be found.
	admin bool
	// autostart launches the daemon when nothing listens.
	autostart bool
	// remote confines the session as a remote caller's (HelloInput.Remote):
	// simlock mcp serves an agent that may be anywhere.
	remote bool
}

// adminToken finds the admin credential: --token, SIMLOCK_ADMIN_TOKEN, then
// the daemon's token file.
func adminToken(cmd *cobra.Command, env Env, home string) string {
	if t, _ := cmd.Flags().GetString("token"); t != "" {
		return t
	}
	if t := env.Getenv("SIMLOCK_ADMIN_TOKEN"); t != "" {
		return t
	}
	b, err := homedir.ReadFile(filepath.Join(home, "admin.token"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// withClient opens a session, runs f with it, and closes it. Errors from
// either become the command's exit.
func withClient(cmd *cobra.Command, env Env, s session, f func(ctx context.Context, c *client.Client) error) error {
	c, err := connect(cmd.Context(), cmd, env, s)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	return fail(f(cmd.Context(), c))
}

// connect opens a session with the daemon of SIMLOCK_HOME. With autostart,
// a daemon it has to start is ready when connect returns.
func connect(ctx context.Context, cmd *cobra.Command, env Env, s session) (*client.Client, error) {
	if err := remoteSocketRefusal(env, cmd); err != nil {
		return nil, err
	}
	home, err := env.home()
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(home, "daemon.sock")
	hello := contract.HelloInput{Client: "simlock-cli/" + env.Version, Principal: s.principal, Remote: s.remote}
	dial := func() (*client.Client, error) {
		if s.admin {
			// Read at each dial: a daemon writes its token before it
			// listens, so once the socket accepts, this is its token.
			hello.AdminToken = adminToken(cmd, env, home)
		}
		return client.Dial(ctx, sock, hello)
	}
	c, err := dial()
	switch {
	case err == nil:
		return c, nil
	case s.autostart && daemonGone(err):
		// Nothing listens, or a daemon accepted and then went away
		// before it answered (it was killed a moment ago): start one,
		// which waits out a daemon still dying with the lock. A home
		// with a service installed has its daemon started by the
		// service manager, never beside it.
		if p, in, ok := installedService(env, home); ok {
			return startService(ctx, home, p, in, dial)
		}
		return startDaemon(ctx, env, home, dial)
	case notListening(err):
		return nil, contract.Errorf(contract.CodeDaemonConnectionLost, "no simlock daemon is running for %s", home)
	}
	return nil, wrapDial(err)
}

func wrapDial(err error) error {
	if err == nil {
		return nil
	}
	var ce *contract.Error
	if errors.As(err, &ce) {
		return ce
	}
	return contract.Errorf(contract.CodeDaemonConnectionLost, "connect to the daemon: %v", err)
}

func notListening(err error) bool { return client.NotListening(err) }

// startupBound bounds an on-demand start as a whole: launching the daemon,
// its socket accepting, and its startup converging (the store opens, the
// drivers claim their device roots, the registry loads). A start that
// succeeds ends as soon as startup has converged.
const startupBound = 2 * time.Minute

// errStartupBound is the cause of a context that startupBound ended.
var errStartupBound = errors.New("the daemon start took longer than " + startupBound.String())

// startDaemon launches `simlock daemon run` in the background, detached from
// this process, waits until its socket accepts and its startup has
// converged, and returns the session dial opens. When another command
// started a daemon first, it waits for that one the same way. The daemon's
// early output goes to daemon.out, which is quoted if it dies at startup.
func startDaemon(ctx context.Context, env Env, home string, dial func() (*client.Client, error)) (*client.Client, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, startupBound, errStartupBound)
	defer cancel()
	for {
		child, err := launchDaemon(ctx, env, home)
		if err != nil {
			return nil, err
		}
		if child == nil {
			err := awaitListening(ctx, home)
			if errors.Is(err, errHolderGone) {
				continue // it was stopping; start a new one
			}
			if err != nil {
				return nil, err
			}
		}
		c, err := dial()
		if err == nil {
			if _, err = awaitReady(ctx, c, home); err == nil {
				return c, nil
			}
			c.Close()
		}
		if ctx.Err() == nil && daemonGone(err) {
			// It listened, then went away: its startup failed. The
			// daemon this command started says why on its way out.
			if child != nil {
				return nil, child.exitError(ctx, home)
			}
			return nil, goneAtStartup(home)
		}
		return nil, wrapDial(err)
	}
}

// child is a daemon this command started.
type child struct {
	exited chan struct{} // closed once it has exited
}

// exitError waits (within ctx) for the daemon to exit and quotes what it
// wrote on its way out.
func (ch *child) exitError(ctx context.Context, home string) error {
	select {
	case <-ctx.Done():
		return startupTimeout(ctx, home)
	case <-ch.exited:
	}
	return contract.Errorf(contract.CodeDaemonStartupFailed, "the daemon exited at startup: %s; see %s",
		startupReason(readOut(home)), filepath.Join(home, "daemon.log"))
}

// launchDaemon starts `simlock daemon run` and returns once its socket
// listens, or, with a nil child, once it has exited because another daemon
// holds the home. The daemon says it listens by writing to a pipe it
// inherits (--notify-fd), so nothing here polls.
func launchDaemon(ctx context.Context, env Env, home string) (*child, error) {
	if err := homedir.Prepare(home); err != nil {
		return nil, err
	}
	outPath := filepath.Join(home, "daemon.out")
	out, err := homedir.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	defer out.Close()
	notifyR, notifyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	defer notifyR.Close()
	cmd := exec.Command(env.Executable, "daemon", "run", "--notify-fd", "3")
	cmd.Env = append(os.Environ(), "SIMLOCK_HOME="+home)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{notifyW} // fd 3 in the daemon
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	// The daemon holds the only write end now: the pipe ends when it
	// writes, or when it exits.
	notifyW.Close()
	if err != nil {
		return nil, contract.Errorf(contract.CodeDaemonStartupFailed, "start daemon: %v", err)
	}
	ch := &child{exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(ch.exited)
	}()
	notified := make(chan bool, 1)
	go func() {
		var b [1]byte
		n, _ := notifyR.Read(b[:])
		notified <- n > 0
	}()
	select {
	case <-ctx.Done():
		return nil, startupTimeout(ctx, home)
	case ok := <-notified:
		if ok {
			return ch, nil
		}
	}
	// The pipe closed unwritten: the daemon is exiting.
	select {
	case <-ctx.Done():
		return nil, startupTimeout(ctx, home)
	case <-ch.exited:
	}
	// Another command started a daemon first when the lock names a live
	// process (this child is gone). Decided on the lock, not on what the
	// child wrote: racing commands share daemon.out, and each launch
	// truncates it.
	msg := readOut(home)
	if holderAlive(filepath.Join(home, "daemon.lock")) || strings.Contains(msg, "already running") {
		return nil, nil
	}
	return nil, contract.Errorf(contract.CodeDaemonStartupFailed, "the daemon exited at startup: %s", startupReason(msg))
}

// errHolderGone means the daemon that held the home went away before its
// socket accepted.
var errHolderGone = errors.New("the daemon holding SIMLOCK_HOME exited")

// awaitListening waits until the socket of a daemon another command started
// accepts. That daemon holds the lock and listens right after writing its
// token, but nothing tells this process when, so this polls, from every
// 2 ms up to every 100 ms, bounded by ctx. If the daemon holding the lock
// exits first (it was stopping), it returns errHolderGone.
func awaitListening(ctx context.Context, home string) error {
	sock := filepath.Join(home, "daemon.sock")
	lockPath := filepath.Join(home, "daemon.lock")
	for wait := 2 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		conn, err := net.Dial("unix", sock)
		if err == nil {
			conn.Close()
			return nil
		}
		if !notListening(err) {
			return wrapDial(err)
		}
		if !holderAlive(lockPath) {
			return errHolderGone
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return startupTimeout(ctx, home)
		case <-t.C:
		}
	}
}

// holderAlive reports whether the process daemon.lock names still runs. It
// reads the pid rather than probing the lock, which would take it for an
// instant and could turn a daemon starting meanwhile away. An empty file
// (a daemon between taking the lock and writing its pid) counts as alive.
func holderAlive(lockPath string) bool {
	b, err := homedir.ReadFile(lockPath)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return true
	}
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// awaitReady waits, on session c, until the daemon's startup has converged
// (status.get with waitReady), within startupBound. A startup that failed or
// ran out of time is DAEMON_STARTUP_FAILED, naming the log to read; a daemon
// that went away meanwhile is DAEMON_CONNECTION_LOST.
func awaitReady(ctx context.Context, c *client.Client, home string) (contract.Status, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, startupBound, errStartupBound)
	defer cancel()
	st, err := c.StatusWith(ctx, contract.StatusGetInput{WaitReady: true})
	if err == nil {
		return st, nil
	}
	if ctx.Err() != nil {
		return st, startupTimeout(ctx, home)
	}
	if ce := contract.AsError(err); ce.Code == contract.CodeDaemonStartupFailed {
		return st, contract.Errorf(ce.Code, "%s; see %s", ce.Message, filepath.Join(home, "daemon.log"))
	}
	return st, err
}

// daemonGone reports whether err means the daemon stopped listening or
// closed the session.
func daemonGone(err error) bool {
	var ce *contract.Error
	return notListening(err) || errors.As(err, &ce) && ce.Code == contract.CodeDaemonConnectionLost
}

// goneAtStartup is the error of a daemon that went away before its startup
// converged, when this command did not start it.
func goneAtStartup(home string) error {
	return contract.Errorf(contract.CodeDaemonStartupFailed, "the daemon went away while starting; see %s and %s",
		filepath.Join(home, "daemon.log"), filepath.Join(home, "daemon.out"))
}

// startupTimeout is the error of a start whose ctx ended: the startup bound
// (DAEMON_STARTUP_FAILED, naming the logs), or the caller's own end.
func startupTimeout(ctx context.Context, home string) error {
	if !errors.Is(context.Cause(ctx), errStartupBound) {
		return ctx.Err()
	}
	return contract.Errorf(contract.CodeDaemonStartupFailed, "the daemon did not finish starting within %s; see %s and %s",
		startupBound, filepath.Join(home, "daemon.log"), filepath.Join(home, "daemon.out"))
}

// readOut is what the daemon wrote to daemon.out.
func readOut(home string) string {
	b, _ := homedir.ReadFile(filepath.Join(home, "daemon.out"))
	return strings.TrimSpace(string(b))
}

// startupReason is what a daemon that died at startup said: the message of
// its error line when it printed one, else its last line.
func startupReason(out string) string {
	line := lastLine(out)
	var e struct {
		Error *contract.Error `json:"error"`
	}
	if json.Unmarshal([]byte(line), &e) == nil && e.Error != nil {
		return e.Error.Message
	}
	return line
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) == 0 || lines[len(lines)-1] == "" {
		return "no output"
	}
	return lines[len(lines)-1]
}

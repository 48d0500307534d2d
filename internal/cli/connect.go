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
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// session describes how a command talks to the daemon.
type session struct {
	principal string
	// admin asks for the admin role when a credential can be found.
	admin bool
	// autostart launches the daemon when nothing listens.
	autostart bool
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
	b, err := os.ReadFile(filepath.Join(home, "admin.token"))
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

// connect opens a session with the daemon of SIMLOCK_HOME.
func connect(ctx context.Context, cmd *cobra.Command, env Env, s session) (*client.Client, error) {
	home, err := env.home()
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(home, "daemon.sock")
	hello := contract.HelloInput{Client: "simlock-cli/" + env.Version, Principal: s.principal}
	dial := func() (*client.Client, error) {
		if s.admin {
			hello.AdminToken = adminToken(cmd, env, home)
		}
		return client.Dial(ctx, sock, hello)
	}
	c, err := dial()
	if err == nil || !notListening(err) {
		return c, wrapDial(err)
	}
	if !s.autostart {
		return nil, contract.Errorf(contract.CodeDaemonConnectionLost, "no simlock daemon is running for %s", home)
	}
	if err := startDaemon(ctx, env, home); err != nil {
		return nil, err
	}
	c, err = dial()
	return c, wrapDial(err)
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

func notListening(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// startDaemon launches `simlock daemon run` in the background, detached from
// this process, and waits until it answers. Its early output goes to
// daemon.out, which is quoted if it dies before answering.
func startDaemon(ctx context.Context, env Env, home string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("create SIMLOCK_HOME: %w", err)
	}
	outPath := filepath.Join(home, "daemon.out")
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(env.Executable, "daemon", "run")
	cmd.Env = append(os.Environ(), "SIMLOCK_HOME="+home)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return contract.Errorf(contract.CodeDaemonStartupFailed, "start daemon: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	sock := filepath.Join(home, "daemon.sock")
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			b, _ := os.ReadFile(outPath)
			msg := strings.TrimSpace(string(b))
			if strings.Contains(msg, "already running") {
				return nil // another CLI started it first
			}
			return contract.Errorf(contract.CodeDaemonStartupFailed, "the daemon exited at startup: %s", startupReason(msg))
		case <-deadline.C:
			return contract.Errorf(contract.CodeDaemonStartupFailed, "the daemon did not answer within 15s; see %s", outPath)
		case <-tick.C:
			if conn, err := net.Dial("unix", sock); err == nil {
				conn.Close()
				return nil
			}
		}
	}
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

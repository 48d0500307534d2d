package ios

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/runner"
)

// CoreSimulator's answers to a no-op transition. The driver asks for a
// state, not a transition, so these are success.
var (
	alreadyBooted   = regexp.MustCompile(`(?i)current state:\s*Booted|already booted`)
	alreadyShutdown = regexp.MustCompile(`(?i)Unable to shutdown.*current state:\s*Shutdown`)
)

// maxStderr bounds the tool output kept in an error: enough for any
// CoreSimulator message, not a runaway log.
const maxStderr = 4096

// CallError is a tool call that failed: it exited non-zero (Err nil), or it
// could not run to completion (Err set: it did not start, timed out with a
// *runner.TimeoutError, or its context ended). Drivers return it inside a
// *driver.CrashError.
type CallError struct {
	// Tool and Args are the call, Tool being "simctl" or "xcodebuild".
	Tool     string
	Args     []string
	ExitCode int
	Stderr   string
	Err      error
}

func (e *CallError) Error() string {
	cmd := e.Tool + " " + strings.Join(e.Args, " ")
	var timeout *runner.TimeoutError
	switch {
	case errors.As(e.Err, &timeout):
		return fmt.Sprintf("%s timed out after %s", cmd, timeout.After)
	case e.Err != nil:
		return fmt.Sprintf("%s: %v", cmd, e.Err)
	}
	return fmt.Sprintf("%s exited with code %d: %s", cmd, e.ExitCode, e.Stderr)
}

func (e *CallError) Unwrap() error { return e.Err }

// TimedOut reports whether the call was stopped for running too long.
func (e *CallError) TimedOut() bool {
	var timeout *runner.TimeoutError
	return errors.As(e.Err, &timeout)
}

// call runs one tool call. A non-zero exit whose stderr matches tolerate
// (nil tolerates nothing) is success; any other failure is a *CallError.
func call(ctx context.Context, r runner.Runner, log *slog.Logger, env []string, path, tool string, args []string, timeout time.Duration, tolerate *regexp.Regexp) ([]byte, error) {
	return callCmd(ctx, r, log, tool, runner.Cmd{Path: path, Args: args, Env: env, Timeout: timeout}, tolerate)
}

// callCmd is call with the whole command given, for a call that sets more
// of it (an output bound): c.Args are the tool's arguments.
func callCmd(ctx context.Context, r runner.Runner, log *slog.Logger, tool string, c runner.Cmd, tolerate *regexp.Regexp) ([]byte, error) {
	args := c.Args
	if tool == "simctl" {
		c.Args = append([]string{"simctl"}, args...)
	}
	start := time.Now()
	res, err := r.Run(ctx, c)
	stderr := strings.TrimSpace(string(res.Stderr))
	if len(stderr) > maxStderr {
		stderr = stderr[:maxStderr] + "…"
	}
	log.DebugContext(ctx, "tool call", "tool", tool, "args", args, "exit", res.ExitCode, "err", err, "took", time.Since(start))
	switch {
	case err != nil:
		return res.Stdout, &CallError{Tool: tool, Args: args, ExitCode: res.ExitCode, Stderr: stderr, Err: err}
	case res.ExitCode == 0:
		return res.Stdout, nil
	case tolerate != nil && tolerate.MatchString(stderr):
		log.DebugContext(ctx, "tolerated", "tool", tool, "args", args, "stderr", stderr)
		return res.Stdout, nil
	}
	return res.Stdout, &CallError{Tool: tool, Args: args, ExitCode: res.ExitCode, Stderr: stderr}
}

// simctl runs `xcrun simctl --set <root> args…` as part of operation op.
func (d *Driver) simctl(ctx context.Context, op string, timeout time.Duration, tolerate *regexp.Regexp, args ...string) ([]byte, error) {
	return d.simctlCmd(ctx, op, runner.Cmd{Args: args, Timeout: timeout}, tolerate)
}

// simctlCmd is simctl with more of the command set (an output bound):
// c.Args are simctl's arguments after --set <root>. Every scoped call goes
// through here, so none can leave out --set.
func (d *Driver) simctlCmd(ctx context.Context, op string, c runner.Cmd, tolerate *regexp.Regexp) ([]byte, error) {
	c.Path, c.Env, c.Args = d.xcrun, d.env, append([]string{"--set", d.root}, c.Args...)
	out, err := callCmd(ctx, d.run, d.log, "simctl", c, tolerate)
	if err != nil {
		return out, &driver.CrashError{Op: op, Err: err}
	}
	return out, nil
}

func crash(op string, format string, args ...any) error {
	return &driver.CrashError{Op: op, Err: fmt.Errorf(format, args...)}
}

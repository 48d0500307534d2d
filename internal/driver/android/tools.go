package android

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/runner"
)

// call runs a tool with the driver's scoped environment. A program that
// could not run or timed out is a *driver.CrashError for op; a non-zero
// exit is left to the caller.
func (d *Driver) call(ctx context.Context, op, path string, timeout time.Duration, stdin []byte, args ...string) (runner.Result, error) {
	return d.callCmd(ctx, op, runner.Cmd{Path: path, Args: args, Timeout: timeout, Stdin: stdin})
}

// callCmd is call with the whole command given, for a call that sets more
// of it (an output bound); its environment is the tool's.
func (d *Driver) callCmd(ctx context.Context, op string, cmd runner.Cmd) (runner.Result, error) {
	cmd.Env = d.env
	if cmd.Path == d.sdk.adb {
		cmd.Env = d.adbEnv
	}
	res, err := d.run.Run(ctx, cmd)
	d.log.Debug("ran", "cmd", cmd.String(), "exit", res.ExitCode, "err", err)
	if err != nil {
		return res, crash(op, err)
	}
	return res, nil
}

// adb runs adb against the private server, restarting the server first if
// it is gone; every call carries -P so that it can reach no other server
// whatever the environment says.
func (d *Driver) adb(ctx context.Context, op string, timeout time.Duration, args ...string) (runner.Result, error) {
	return d.adbCmd(ctx, op, runner.Cmd{Args: args, Timeout: timeout})
}

// adbCmd is adb with more of the command set (an output bound): cmd.Args
// are adb's arguments after -P.
func (d *Driver) adbCmd(ctx context.Context, op string, cmd runner.Cmd) (runner.Result, error) {
	if err := d.superviseServer(ctx, op); err != nil {
		return runner.Result{}, err
	}
	cmd.Path, cmd.Args = d.sdk.adb, d.adbArgs(cmd.Args)
	return d.callCmd(ctx, op, cmd)
}

// adbArgs is args of an adb call against the private server.
func (d *Driver) adbArgs(args []string) []string {
	return append([]string{"-P", strconv.Itoa(d.port)}, args...)
}

// serialAdb runs adb for one emulator.
func (d *Driver) serialAdb(ctx context.Context, op string, timeout time.Duration, serial string, args ...string) (runner.Result, error) {
	return d.adb(ctx, op, timeout, append([]string{"-s", serial}, args...)...)
}

// succeeded is call's error, or a *driver.CrashError for a non-zero exit.
func succeeded(res runner.Result, err error, op, what string) error {
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return crashf(op, "%s exited with code %d: %s", what, res.ExitCode, outputOf(res))
	}
	return nil
}

// outputOf is a result's output for an error message: stderr, or stdout
// when stderr is empty.
func outputOf(res runner.Result) string {
	if s := strings.TrimSpace(string(res.Stderr)); s != "" {
		return lastLines(s)
	}
	return lastLines(strings.TrimSpace(string(res.Stdout)))
}

// lastLines keeps the end of a long output, where tools put the error.
func lastLines(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}

func serialOf(port int) string { return fmt.Sprintf("emulator-%d", port) }

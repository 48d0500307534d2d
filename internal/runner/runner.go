// Package runner is the one seam through which simlock runs external
// programs (xcrun, xcodebuild, avdmanager, emulator, adb, sdkmanager). Drivers
// take a Runner; production wires OS, tests may wire scripted fakes or put
// stateful shim executables on PATH.
//
// OS is safe for concurrent use; every call has its own process.
package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/simlock/simlock/internal/homedir"
)

// Cmd is one program invocation. It is never run through a shell.
type Cmd struct {
	// Path is the program: an absolute path or a name looked up on PATH.
	Path string
	Args []string
	// Env is added to the daemon's environment (later entries win).
	Env []string
	Dir string
	// Timeout bounds the call; 0 means only ctx bounds it.
	Timeout time.Duration
	Stdin   []byte
	// StopGrace is how long a program told to stop (SIGTERM, when ctx or
	// Timeout ends) has before it is killed; 0 means 5 s.
	StopGrace time.Duration
}

// String renders the command for logs and error messages.
func (c Cmd) String() string {
	return strings.TrimSpace(c.Path + " " + strings.Join(c.Args, " "))
}

// Result is what a finished program left. A non-zero exit is a Result, not
// an error.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// TimeoutError is a call that ran past its Timeout and was stopped.
type TimeoutError struct {
	Cmd   Cmd
	After time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s timed out after %s", e.Cmd, e.After)
}

// Runner runs programs.
type Runner interface {
	// Run runs cmd to completion. The error is set only when the program
	// could not start, timed out (*TimeoutError) or ctx ended.
	Run(ctx context.Context, cmd Cmd) (Result, error)
	// Start starts a long-lived program (an emulator, an adb server) in its
	// own process group, detached from the daemon's terminal, with output
	// appended to logPath ("" discards it). It outlives ctx.
	Start(cmd Cmd, logPath string) (Process, error)
}

// Process is a started long-lived program.
type Process interface {
	Pid() int
	// Wait blocks until it exits.
	Wait() error
	// Signal sends sig to its process group.
	Signal(sig syscall.Signal) error
}

// errCmdTimeout marks a context ended by a Cmd's own Timeout.
var errCmdTimeout = errors.New("command timeout")

// OS runs real programs.
type OS struct{}

var _ Runner = OS{}

func env(extra []string) []string {
	if len(extra) == 0 {
		return nil // inherit
	}
	return append(os.Environ(), extra...)
}

// Run implements Runner.
func (OS) Run(ctx context.Context, c Cmd) (Result, error) {
	var stdout, stderr bytes.Buffer
	code, err := run(ctx, c, &stdout, &stderr)
	return Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: code}, err
}

// Stream runs c to completion like Run, but hands its output to stdout and
// stderr as the program writes it instead of collecting it. Writes to
// stdout and stderr may come from two goroutines at once.
func (OS) Stream(ctx context.Context, c Cmd, stdout, stderr io.Writer) (exitCode int, err error) {
	return run(ctx, c, stdout, stderr)
}

func run(ctx context.Context, c Cmd, stdout, stderr io.Writer) (int, error) {
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.Timeout, errCmdTimeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env = env(c.Env)
	cmd.Dir = c.Dir
	// Stop politely first: simulators and emulators clean up on SIGTERM.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	if c.StopGrace > 0 {
		cmd.WaitDelay = c.StopGrace
	}
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		// Only this call's own Timeout is a TimeoutError; the caller's
		// deadline or cancel is the caller's to report.
		if errors.Is(context.Cause(ctx), errCmdTimeout) {
			return code, &TimeoutError{Cmd: c, After: c.Timeout}
		}
		return code, fmt.Errorf("%s: %w", c, context.Cause(ctx))
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return code, fmt.Errorf("run %s: %w", c.Path, err)
	}
	return code, nil
}

// Start implements Runner.
func (OS) Start(c Cmd, logPath string) (Process, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = env(c.Env)
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if logPath != "" {
		f, err := homedir.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", c.Path, err)
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.Path, err)
	}
	return &osProcess{cmd: cmd}, nil
}

type osProcess struct{ cmd *exec.Cmd }

func (p *osProcess) Pid() int    { return p.cmd.Process.Pid }
func (p *osProcess) Wait() error { return p.cmd.Wait() }
func (p *osProcess) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

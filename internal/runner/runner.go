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
	// MaxStdout bounds the output Run keeps, in bytes (0: DefaultMaxStdout).
	// A program that writes more is stopped, as at its Timeout, and Run
	// returns *OutputTooLargeError; with KeepTail, it runs on and Run keeps
	// its last MaxStdout bytes, from the first whole line among them
	// (Result.StdoutTruncated). A tool whose output a tenant can swell (a
	// device's log) cannot make the daemon hold all of it.
	MaxStdout int
	KeepTail  bool
}

// DefaultMaxStdout is the output Run keeps of a program whose Cmd sets no
// MaxStdout: far more than any tool's answer simlock reads, and a bound on
// one that runs away.
const DefaultMaxStdout = 64 << 20

// maxStderrKept is the stderr Run keeps, from its start: what a program
// says went wrong is read for messages only; the rest is dropped.
const maxStderrKept = 1 << 20

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
	// StdoutTruncated says some of the output is not in Stdout: it is
	// the tail of a longer one (Cmd.KeepTail), or its head, from a program
	// stopped for its length (*OutputTooLargeError).
	StdoutTruncated bool
}

// OutputTooLargeError is a call stopped for writing more than its
// Cmd.MaxStdout.
type OutputTooLargeError struct {
	Cmd   Cmd
	Limit int
}

func (e *OutputTooLargeError) Error() string {
	return fmt.Sprintf("%s wrote more than %d bytes and was stopped", e.Cmd, e.Limit)
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

// errCmdTimeout marks a context ended by a Cmd's own Timeout, and
// errTooMuchOutput one ended for its output (Cmd.MaxStdout).
var (
	errCmdTimeout    = errors.New("command timeout")
	errTooMuchOutput = errors.New("too much output")
)

// OS runs real programs.
type OS struct{}

var _ Runner = OS{}

func env(extra []string) []string {
	if len(extra) == 0 {
		return nil // inherit
	}
	return append(os.Environ(), extra...)
}

// Run implements Runner. It keeps the program's output within the Cmd's
// bounds (MaxStdout, KeepTail; stderr's first maxStderrKept bytes).
func (OS) Run(ctx context.Context, c Cmd) (Result, error) {
	limit := c.MaxStdout
	if limit <= 0 {
		limit = DefaultMaxStdout
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var stdout keeper = &headBuffer{limit: limit, over: func() { stop(errTooMuchOutput) }}
	if c.KeepTail {
		stdout = &tailBuffer{limit: limit}
	}
	stderr := &headBuffer{limit: maxStderrKept}
	code, err := run(ctx, c, stdout, stderr)
	if errors.Is(context.Cause(ctx), errTooMuchOutput) {
		err = &OutputTooLargeError{Cmd: c, Limit: limit}
	}
	out, truncated := stdout.kept()
	errOut, _ := stderr.kept()
	return Result{Stdout: out, Stderr: errOut, ExitCode: code, StdoutTruncated: truncated}, err
}

// keeper is an output Run keeps within a bound.
type keeper interface {
	io.Writer
	// kept is what was kept, and whether some of the output was not.
	kept() ([]byte, bool)
}

// headBuffer keeps the first limit bytes written to it and drops the rest,
// calling over (when set) once at the first byte past the limit.
type headBuffer struct {
	limit   int
	over    func()
	buf     bytes.Buffer
	dropped bool
}

func (h *headBuffer) Write(p []byte) (int, error) {
	room := h.limit - h.buf.Len()
	if len(p) > room {
		h.buf.Write(p[:max(room, 0)])
		if !h.dropped && h.over != nil {
			h.over()
		}
		h.dropped = true
		return len(p), nil
	}
	h.buf.Write(p)
	return len(p), nil
}

func (h *headBuffer) kept() ([]byte, bool) { return h.buf.Bytes(), h.dropped }

// tailBuffer keeps the last limit bytes written to it, in a ring.
type tailBuffer struct {
	limit   int
	ring    []byte // grows to limit, then is written round
	next    int    // where the next byte goes once the ring is full
	dropped bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > t.limit {
		p = p[len(p)-t.limit:]
		t.dropped = true
	}
	if room := t.limit - len(t.ring); room > 0 {
		take := min(room, len(p))
		t.ring = append(t.ring, p[:take]...)
		p = p[take:]
	}
	for len(p) > 0 {
		c := copy(t.ring[t.next:], p)
		p = p[c:]
		t.next = (t.next + c) % t.limit
		t.dropped = true
	}
	return n, nil
}

// kept is the tail, oldest byte first, from its first whole line when the
// output was cut.
func (t *tailBuffer) kept() ([]byte, bool) {
	if !t.dropped {
		return t.ring, false
	}
	out := append(append(make([]byte, 0, len(t.ring)), t.ring[t.next:]...), t.ring[:t.next]...)
	if i := bytes.IndexByte(out, '\n'); i >= 0 {
		return out[i+1:], true
	}
	return nil, true
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

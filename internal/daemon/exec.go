package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/runner"
)

// execStopGrace is how long a command whose caller went away, or that
// ran past its timeout, has after SIGTERM before it is killed.
const execStopGrace = 5 * time.Second

// exec runs simctl or adb on a leased device on this machine and streams
// its output back as pushes. Every check happens before exec-started is
// pushed; after it, only the command's exit, a timeout, or its caller
// going ends the call. ctx is the call's: when it ends (the session ended,
// the call was cancelled with call.cancel, as a gateway does when its own
// caller goes) the command is stopped: SIGTERM, then SIGKILL after
// execStopGrace. Its stdin is the caller's whole input, closed once
// written. A lease runs at most exec.maxConcurrent commands at once, and
// its commands end with it: the lease's end stops them (execParticipant)
// before its device is cleaned, and the call answers UNKNOWN_LEASE.
func (d *Daemon) exec(ctx context.Context, s *session, c leasing.Caller, call json.RawMessage, in contract.ExecInput) (contract.ExecResult, error) {
	l, err := d.leaseToRun(c, in.LeaseID, in.RequesterID)
	if err != nil {
		return contract.ExecResult{}, err
	}
	if in.Tool != "simctl" && in.Tool != "adb" {
		return contract.ExecResult{}, contract.Errorf(contract.CodeUnknownPassthroughTool, "no tool %q: simlock runs simctl (iOS) and adb (Android)", contract.Clip(in.Tool)).
			With("tool", contract.Clip(in.Tool))
	}
	cmd, err := d.command(in.Tool, in.Args, &l, s.remote)
	if err != nil {
		return contract.ExecResult{}, err
	}
	if in.Tool == "adb" && bareShell(cmd.Args) {
		return contract.ExecResult{}, contract.Errorf(contract.CodePassthroughRefused, "adb shell without a command needs a terminal; pass the command to run, as in adb shell getprop").
			With("tool", in.Tool)
	}
	// The command ends with its call, its lease, or the daemon.
	run, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	defer context.AfterFunc(d.life, func() { stop(errDaemonStopping) })()
	limit := int(d.opts.Config.Int("exec.maxConcurrent"))
	lease := execKey{l.Lease.OwnerID, l.Lease.UniqueKey()}
	release, ok := d.execs.take(lease, limit, stop)
	if !ok {
		return contract.ExecResult{}, contract.Errorf(contract.CodeTooManyStreams,
			"lease %s already runs %d commands, the most one lease may (exec.maxConcurrent); wait for one to end", in.LeaseID, limit).
			With("leaseId", in.LeaseID).With("maxConcurrent", limit)
	}
	defer release()
	// A lease's end stops the commands it finds holding a slot; one that
	// ended between the check above and the slot is seen here.
	if _, err := d.engine.Get(c, contract.LeaseIDInput{LeaseID: lease.lease}); err != nil {
		return contract.ExecResult{}, leaseEndedError(in.LeaseID, in.Tool, "was not run")
	}
	timeout := time.Duration(d.opts.Config.Int("exec.timeoutMs")) * time.Millisecond
	key := "exec.timeoutMs"
	if t := time.Duration(in.TimeoutMs) * time.Millisecond; t > 0 && t < timeout {
		timeout, key = t, "the call's timeoutMs"
	}
	rc := runner.Cmd{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Timeout: timeout, StopGrace: execStopGrace}
	if in.Stdin != nil {
		rc.Stdin = []byte(*in.Stdin)
	} else {
		rc.Stdin = []byte{} // never the daemon's own stdin
	}
	s.push(contract.Push{Push: contract.PushExecStarted, ID: call})
	out := &chunker{s: s, call: call}
	code, err := runner.OS{}.Stream(run, rc, out.stream("stdout"), out.stream("stderr"))
	out.flush()
	var te *runner.TimeoutError
	switch {
	case errors.As(err, &te):
		return contract.ExecResult{}, contract.Errorf(contract.CodeExecTimeout, "%s ran longer than %s (%d ms) and was stopped", in.Tool, key, timeout.Milliseconds()).
			With("timeoutMs", timeout.Milliseconds())
	case err != nil && ctx.Err() != nil:
		return contract.ExecResult{}, contract.Errorf(contract.CodeCancelled, "the caller went away; %s was stopped", in.Tool)
	case err != nil && errors.Is(context.Cause(run), errLeaseEnded):
		return contract.ExecResult{}, leaseEndedError(in.LeaseID, in.Tool, "was stopped")
	case err != nil && d.life.Err() != nil:
		return contract.ExecResult{}, contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping; %s was stopped", in.Tool)
	case err != nil && s.remote:
		// The error names the tool's path on this machine, which is not
		// a remote caller's to learn: the log keeps it.
		d.log.Warn("a command could not run", "tool", in.Tool, "leaseId", in.LeaseID, "err", err)
		return contract.ExecResult{}, contract.Errorf(contract.CodeInternal, "%s could not run on the device's machine; its daemon log says why", in.Tool)
	case err != nil:
		return contract.ExecResult{}, contract.Errorf(contract.CodeInternal, "run %s: %v", in.Tool, err)
	}
	return contract.ExecResult{ExitCode: code}, nil
}

// Causes of a command's stop other than its caller's going.
var (
	errLeaseEnded     = errors.New("the lease ended")
	errDaemonStopping = errors.New("the daemon is stopping")
)

// leaseEndedError answers an exec whose lease ended.
func leaseEndedError(leaseID, tool, what string) error {
	return contract.Errorf(contract.CodeUnknownLease, "lease %s ended; %s %s", leaseID, tool, what).With("leaseId", leaseID)
}

// execSlots holds the device.exec commands running per lease: at most
// exec.maxConcurrent each, and each stoppable when its lease ends. Its
// zero value is ready; it is safe for concurrent use.
type execSlots struct {
	mu sync.Mutex
	// mu guards running.
	running map[execKey]map[*execRun]struct{}
}

// execKey names a lease: its owner and unique key.
type execKey struct{ owner, lease string }

// execRun is one command in a slot: stop ends it, done is closed once it
// has given its slot back.
type execRun struct {
	stop context.CancelCauseFunc
	done chan struct{}
}

// take claims one of limit slots of lease for a command that stop ends;
// release gives it back (once).
func (x *execSlots) take(lease execKey, limit int, stop context.CancelCauseFunc) (release func(), ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.running[lease]) >= limit {
		return nil, false
	}
	if x.running == nil {
		x.running = map[execKey]map[*execRun]struct{}{}
	}
	if x.running[lease] == nil {
		x.running[lease] = map[*execRun]struct{}{}
	}
	r := &execRun{stop: stop, done: make(chan struct{})}
	x.running[lease][r] = struct{}{}
	var once sync.Once
	return func() {
		once.Do(func() {
			x.mu.Lock()
			defer x.mu.Unlock()
			delete(x.running[lease], r)
			if len(x.running[lease]) == 0 {
				delete(x.running, lease)
			}
			close(r.done)
		})
	}, true
}

// busy reports whether lease has a command in a slot.
func (x *execSlots) busy(lease execKey) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.running[lease]) > 0
}

// endLease stops the commands of lease and waits until they have given
// their slots back (each has execStopGrace after SIGTERM), or ctx ends.
func (x *execSlots) endLease(ctx context.Context, lease execKey) {
	x.mu.Lock()
	runs := make([]*execRun, 0, len(x.running[lease]))
	for r := range x.running[lease] {
		runs = append(runs, r)
	}
	x.mu.Unlock()
	for _, r := range runs {
		r.stop(errLeaseEnded)
	}
	for _, r := range runs {
		select {
		case <-r.done:
		case <-ctx.Done():
			return
		}
	}
}

// execParticipant stops a lease's commands when the lease ends, before its
// device is cleaned: a command of a lease that ended reaches a device that
// is no longer its holder's.
type execParticipant struct{ d *Daemon }

var _ leasing.LeaseEndIdler = execParticipant{}

// IdleFor says a lease with no command running gives the participant
// nothing to do.
func (p execParticipant) IdleFor(ended leasing.EndedLease) bool {
	return !p.d.execs.busy(execKey{ended.OwnerID, ended.LeaseID})
}

func (p execParticipant) LeaseEnded(ctx context.Context, ended leasing.EndedLease) error {
	p.d.execs.endLease(ctx, execKey{ended.OwnerID, ended.LeaseID})
	return nil
}

// leaseToRun is the lease c may run a command on, or move files into and
// out of (queue.Caller.ActsOn says who may).
func (d *Daemon) leaseToRun(c leasing.Caller, leaseID, requesterID string) (contract.LeaseGetResult, error) {
	l, err := d.engine.Get(c, contract.LeaseIDInput{LeaseID: leaseID})
	if err != nil {
		return contract.LeaseGetResult{}, err
	}
	if err := c.ActsOn(leaseID, requesterID, l.Lease.RequesterID, l.Lease.OwnerID); err != nil {
		return contract.LeaseGetResult{}, err
	}
	return l, nil
}

// bareShell reports whether adb args open an interactive shell: the shell
// subcommand with nothing to run.
func bareShell(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "-s", "-t", "-H", "-P", "-L", "--serial", "--transport-id":
			i++ // takes a value
			continue
		}
		if len(a) > 0 && a[0] == '-' {
			continue
		}
		if a != "shell" {
			return false
		}
		for _, rest := range args[i+1:] {
			if len(rest) == 0 || rest[0] != '-' {
				return false
			}
		}
		return true
	}
	return false
}

// chunker turns a command's output into exec-output pushes. A chunk never
// ends inside a UTF-8 character: the start of a split one waits for the
// next write.
type chunker struct {
	s    *session
	call json.RawMessage
	mu   sync.Mutex // one push at a time, so chunks keep their order per stream
	held map[string][]byte
}

func (c *chunker) stream(name string) io.Writer { return streamWriter{c: c, name: name} }

type streamWriter struct {
	c    *chunker
	name string
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.c.held == nil {
		w.c.held = map[string][]byte{}
	}
	buf := append(w.c.held[w.name], p...)
	cut := len(buf) - partialRune(buf)
	w.c.held[w.name] = append([]byte(nil), buf[cut:]...)
	if cut > 0 {
		w.c.send(w.name, buf[:cut])
	}
	return len(p), nil
}

func (c *chunker) send(stream string, b []byte) {
	c.s.push(contract.Push{Push: contract.PushExecOutput, ID: c.call, Output: &contract.ExecOutput{Stream: stream, Chunk: string(b)}})
}

// flush sends whatever was held back once the command has ended.
func (c *chunker) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range []string{"stdout", "stderr"} {
		if b := c.held[name]; len(b) > 0 {
			c.send(name, b)
		}
	}
	c.held = nil
}

// partialRune is how many bytes at the end of b start a UTF-8 character
// that is not complete yet.
func partialRune(b []byte) int {
	for n := 1; n <= utf8.UTFMax-1 && n <= len(b); n++ {
		c := b[len(b)-n]
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}

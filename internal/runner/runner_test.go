package runner

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRunCapturesOutputAndExitCode(t *testing.T) {
	res, err := OS{}.Run(context.Background(), Cmd{Path: "sh", Args: []string{"-c", "echo out; echo err >&2; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.ExitCode != 3 {
		t.Errorf("result = %q %q %d", res.Stdout, res.Stderr, res.ExitCode)
	}
}

func TestRunTimesOut(t *testing.T) {
	_, err := OS{}.Run(context.Background(), Cmd{Path: "sleep", Args: []string{"10"}, Timeout: 50 * time.Millisecond})
	var te *TimeoutError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "timed out after 50ms") {
		t.Errorf("err = %v, want a TimeoutError", err)
	}
}

func TestRunPassesEnvAndStdin(t *testing.T) {
	res, err := OS{}.Run(context.Background(), Cmd{Path: "sh", Args: []string{"-c", "cat; echo $SIMLOCK_X"}, Env: []string{"SIMLOCK_X=yes"}, Stdin: []byte("in\n")})
	if err != nil || string(res.Stdout) != "in\nyes\n" {
		t.Errorf("stdout = %q, %v", res.Stdout, err)
	}
}

func TestMissingProgramIsAnError(t *testing.T) {
	if _, err := (OS{}).Run(context.Background(), Cmd{Path: "simlock-no-such-tool"}); err == nil {
		t.Error("no error for a missing program")
	}
}

func TestCallersDeadlineIsNotTheCommandsTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := OS{}.Run(ctx, Cmd{Path: "sleep", Args: []string{"10"}, Timeout: time.Minute})
	var te *TimeoutError
	if errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the caller's deadline, not a TimeoutError", err)
	}
}

func TestStopGraceBoundsAProgramThatIgnoresSIGTERM(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := &signalWriter{ch: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The program says it is ready, then ignores SIGTERM.
		_, _ = OS{}.Stream(ctx, Cmd{Path: "/bin/sh", Args: []string{"-c", `trap "" TERM; echo ready; while :; do sleep 1; done`},
			StopGrace: 100 * time.Millisecond}, ready, io.Discard)
	}()
	<-ready.ch
	t0 := time.Now()
	cancel()
	<-done
	// The default grace is 5 s; the program is killed well before that.
	if took := time.Since(t0); took > 3*time.Second {
		t.Errorf("stopping took %s with a 100 ms grace", took)
	}
}

// signalWriter closes ch at the first write.
type signalWriter struct {
	once sync.Once
	ch   chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.ch) })
	return len(p), nil
}

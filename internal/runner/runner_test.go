package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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

// A program that writes more than its Cmd's MaxStdout is stopped at once,
// not at its Timeout, and Run says why; what it kept is the bound's worth.
func TestRunStopsAProgramPastItsOutputBound(t *testing.T) {
	res, err := OS{}.Run(context.Background(), Cmd{Path: "yes", MaxStdout: 1 << 20, Timeout: 20 * time.Second})
	var big *OutputTooLargeError
	if !errors.As(err, &big) || big.Limit != 1<<20 {
		t.Fatalf("err = %v, want an OutputTooLargeError of 1 MiB", err)
	}
	if len(res.Stdout) != 1<<20 || !res.StdoutTruncated {
		t.Errorf("kept %d bytes (truncated %v), want the first 1 MiB", len(res.Stdout), res.StdoutTruncated)
	}
}

// With KeepTail a long output runs to its end and Run keeps its last bytes,
// from a whole line on.
func TestRunKeepsTheTailOfALongOutput(t *testing.T) {
	res, err := OS{}.Run(context.Background(), Cmd{Path: "seq", Args: []string{"1", "200000"}, MaxStdout: 4096, KeepTail: true})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run = %v, exit %d", err, res.ExitCode)
	}
	lines := strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n")
	if !res.StdoutTruncated || len(res.Stdout) > 4096 || len(res.Stdout) < 4096-8 || lines[len(lines)-1] != "200000" {
		t.Fatalf("kept %d bytes ending %q (truncated %v), want the last 4 KiB of whole lines", len(res.Stdout), lines[len(lines)-1], res.StdoutTruncated)
	}
	for i, l := range lines {
		if want := fmt.Sprint(200000 - len(lines) + 1 + i); l != want {
			t.Fatalf("line %d of the tail is %q, want %q", i, l, want)
		}
	}
}

// A program's stderr is kept from its start, within a bound, and its
// length is no error.
func TestRunKeepsTheStartOfStderr(t *testing.T) {
	res, err := OS{}.Run(context.Background(), Cmd{Path: "sh", Args: []string{"-c", "head -c 3000000 /dev/zero | tr '\\0' x >&2; echo done"}})
	if err != nil || string(res.Stdout) != "done\n" {
		t.Fatalf("Run = %v, stdout %q", err, res.Stdout)
	}
	if len(res.Stderr) != maxStderrKept {
		t.Errorf("kept %d bytes of stderr, want %d", len(res.Stderr), maxStderrKept)
	}
}

// The tail buffer keeps exactly the last bytes written, whatever the sizes
// of the writes, from the first whole line when it dropped any.
func TestTailBufferKeepsTheLastBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		limit := 1 + rng.IntN(300)
		tb := &tailBuffer{limit: limit}
		var all []byte
		for range rng.IntN(40) {
			p := make([]byte, rng.IntN(2*limit))
			for i := range p {
				p[i] = "ab\n"[rng.IntN(3)]
			}
			all = append(all, p...)
			if n, err := tb.Write(p); n != len(p) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		want, cut := all, false
		if len(all) > limit {
			want, cut = all[len(all)-limit:], true
			if i := bytes.IndexByte(want, '\n'); i >= 0 {
				want = want[i+1:]
			} else {
				want = nil
			}
		}
		got, truncated := tb.kept()
		if !bytes.Equal(got, want) || truncated != cut {
			t.Fatalf("round %d (limit %d, %d bytes written): kept %q (truncated %v), want %q (%v)", round, limit, len(all), got, truncated, want, cut)
		}
	}
}

package runner

import (
	"context"
	"errors"
	"strings"
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

package bintest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Result is one finished run of the binary.
type Result struct {
	Args           []string
	Code           int
	Stdout, Stderr string
	Elapsed        time.Duration
	Ended          time.Time
}

// Exec runs bin with args in env to completion. A non-zero exit is a
// Result; the error says it could not run, or did not finish within ctx
// (its output so far is in the Result). Pipes a daemon it starts inherits
// are given up 5 s after it exits, so a background child never holds Exec.
func Exec(ctx context.Context, bin string, env []string, args ...string) (Result, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := Result{Args: args, Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String(),
		Elapsed: time.Since(start), Ended: time.Now()}
	if ctx.Err() != nil {
		return r, fmt.Errorf("simlock %s did not finish: %w", strings.Join(args, " "), ctx.Err())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return r, err
	}
	return r, nil
}

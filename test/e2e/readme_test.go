package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeBound bounds the whole README run: the two benchmark blocks take
// most of it.
const readmeBound = 5 * time.Minute

// readmeBlocks are the README's sh code blocks, in order.
func readmeBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```").FindAllStringSubmatch(string(b), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// The README's command blocks work when run in order in one shell, as a new
// user runs them: in a fresh home directory, on the demo driver, with the
// Go toolchain and nothing else. The block that runs the test suite is the
// one command left out (it is what runs this test).
func TestTheREADMEBlocksRunInOrder(t *testing.T) {
	t.Parallel()
	blocks := readmeBlocks(t)
	if len(blocks) < 4 {
		t.Fatalf("README has %d sh blocks; the test expects the lease, test, next-steps and HTTP ones at least", len(blocks))
	}
	home := t.TempDir()
	// The one setting the README does not make: its HTTP API takes a port
	// from the OS instead of the default 4700, which another program on
	// the host may hold. The block reads the address back from status.
	if err := os.MkdirAll(filepath.Join(home, ".simlock"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".simlock", "config.json"), []byte(`{"http":{"port":0}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	ran := 0
	for i, b := range blocks {
		if strings.TrimSpace(b) == "go test ./..." {
			continue
		}
		fmt.Fprintf(&script, "echo '### README block %d' >&2\n%s\n", i+1, b)
		ran++
	}
	ctx, cancel := context.WithTimeout(context.Background(), readmeBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = moduleRoot
	cmd.Env = readmeEnv(t, home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t.Cleanup(func() {
		// Whatever the outcome, no daemon outlives the test.
		stop := exec.Command(filepath.Join(home, "go", "bin", "simlock"), "daemon", "stop")
		stop.Env = cmd.Env
		_ = stop.Run()
	})
	err := cmd.Run()
	last := "before the first block"
	if i := strings.LastIndex(out.String(), "### README block "); i >= 0 {
		last, _, _ = strings.Cut(out.String()[i+4:], "\n")
	}
	switch {
	case ctx.Err() != nil:
		t.Fatalf("the README's blocks did not finish within %s; the last one started was %s\n%s", readmeBound, last, out.String())
	case err != nil:
		t.Fatalf("%s failed (%v); run in order, the README's blocks must all succeed\n%s", last, err, out.String())
	}
	if n := strings.Count(out.String(), "### README block "); n != ran {
		t.Errorf("%d blocks ran, want %d", n, ran)
	}
	// The HTTP block ends its wait on a grant, not on an error.
	if !strings.Contains(out.String(), `"state":"granted"`) {
		t.Errorf("the HTTP block printed no granted request\n%s", out.String())
	}
}

// readmeEnv is a new user's environment: this process's without simlock's
// variables, a home of its own (so ~/.simlock and the Go bin directory are
// fresh), and the module and build caches of this machine (so the run needs
// no network).
func readmeEnv(t *testing.T, home string) []string {
	t.Helper()
	caches, err := exec.Command("go", "env", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(caches)), "\n")
	if len(lines) != 2 {
		t.Fatalf("go env GOMODCACHE GOCACHE = %q", caches)
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "SIMLOCK_"), name == "HOME", name == "GOPATH", name == "GOBIN",
			name == "GOMODCACHE", name == "GOCACHE":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "GOPATH="+filepath.Join(home, "go"),
		"GOMODCACHE="+lines[0], "GOCACHE="+lines[1])
}

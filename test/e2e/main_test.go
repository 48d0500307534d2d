package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// simlockBin is the binary under test, built once by TestMain.
var simlockBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go env GOMOD: %v\n", err)
		return 1
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		fmt.Fprintln(os.Stderr, "e2e: not inside the simlock module (go env GOMOD is empty)")
		return 1
	}
	dir, err := os.MkdirTemp("", "simlock-e2e-bin")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	simlockBin = filepath.Join(dir, "simlock")
	build := exec.Command("go", "build", "-o", simlockBin, "github.com/simlock/simlock/cmd/simlock")
	build.Dir = filepath.Dir(gomod)
	if b, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building simlock: %v\n%s", err, b)
		return 1
	}
	return m.Run()
}

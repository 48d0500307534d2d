package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// simlockBin is the binary under test, built once by TestMain.
var simlockBin string

// moduleRoot is the simlock module's directory.
var moduleRoot string

var consultOnce sync.Once

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
	moduleRoot = filepath.Dir(gomod)
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

// consultSourcesOnce runs consultSources from inside a test (opens in
// TestMain are not recorded), failing the test if the tree cannot be read.
func consultSourcesOnce(t *testing.T) {
	var err error
	consultOnce.Do(func() { err = consultSources(moduleRoot) })
	if err != nil {
		t.Fatal(err)
	}
}

// consultSources opens every source file of the module. go test caches a
// package's result by the files its tests open; these tests build the
// binary in a subprocess, which go test cannot see, so without this a
// change to simlock would replay a stale pass.
func consultSources(root string) error {
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || (strings.HasPrefix(d.Name(), ".") && path != root)) {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum" || strings.HasSuffix(path, ".sql")) {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			f.Close()
		}
		return nil
	})
}

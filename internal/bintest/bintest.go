// Package bintest is the harness of the tests that run the simlock binary
// as a user does (the end-to-end, browser and chaos tests): it builds the
// binary, keeps go test's result cache honest about a binary it cannot see
// being built, and gives each test a Home, a temporary SIMLOCK_HOME the
// binary runs in with the daemon it starts there.
package bintest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModuleRoot is the directory of the simlock module the test runs in.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the simlock module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}

// Build builds cmd/simlock of the module at root into dir and returns the
// binary's path.
func Build(root, dir string) (string, error) {
	bin := filepath.Join(dir, "simlock")
	build := exec.Command("go", "build", "-o", bin, "github.com/simlock/simlock/cmd/simlock")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building simlock: %w\n%s", err, b)
	}
	return bin, nil
}

// ConsultSources opens every source file of the module. go test caches a
// package's result by the files its tests open; a test that builds the
// binary in a subprocess opens none of them, so without this a change to
// simlock would replay a stale pass. Call it from inside a test: opens in
// TestMain are not recorded.
func ConsultSources(root string) error {
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

// Main builds the binary into a temporary directory, runs run with its
// path and the module's root, and removes it: the body of a TestMain of a
// package of such tests (name prefixes its errors). It returns the exit
// code for os.Exit.
func Main(name string, run func(bin, root string) int) int {
	root, err := ModuleRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "simlock-"+name+"-bin")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := Build(root, dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	return run(bin, root)
}

package e2e

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/bintest"
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
	root, err := bintest.ModuleRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	moduleRoot = root
	dir, err := os.MkdirTemp("", "simlock-e2e-bin")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if simlockBin, err = bintest.Build(root, dir); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	return m.Run()
}

// consultSourcesOnce runs bintest.ConsultSources from inside a test,
// failing the test if the tree cannot be read.
func consultSourcesOnce(t *testing.T) {
	var err error
	consultOnce.Do(func() { err = bintest.ConsultSources(moduleRoot) })
	if err != nil {
		t.Fatal(err)
	}
}

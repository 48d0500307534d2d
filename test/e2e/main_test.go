package e2e

import (
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
	return bintest.Main("e2e", func(bin, root string) int {
		simlockBin, moduleRoot = bin, root
		code := m.Run()
		if failOnOpenAPIViolations(os.Stderr) && code == 0 {
			code = 1
		}
		return code
	})
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

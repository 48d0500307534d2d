package browser

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/testtool"

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
	return bintest.Main("browser", func(bin, root string) int {
		simlockBin, moduleRoot = bin, root
		code := m.Run()
		if shots := screenshotDir(); shots != "" && screenshotsTaken() > 0 {
			fmt.Printf("browser: %d screenshots in %s\n", screenshotsTaken(), shots)
		}
		return code
	})
}

// consultSourcesOnce runs bintest.ConsultSources from inside a test, so
// go test's cache sees the sources of the binary the test runs.
func consultSourcesOnce(t *testing.T) {
	t.Helper()
	var err error
	consultOnce.Do(func() { err = bintest.ConsultSources(moduleRoot) })
	if err != nil {
		t.Fatal(err)
	}
}

// chromiumPath finds the browser: SIMLOCK_CHROMIUM, else chromium (or
// chromium-browser, google-chrome) on the PATH. Without one the test is
// skipped, saying why, except under CI=true, where it fails: CI installs
// chromium, so a missing one there is a broken machine, not a choice.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SIMLOCK_CHROMIUM"); p != "" {
		return p
	}
	return testtool.Find(t, "install it (apt-get install -y chromium) or name one in SIMLOCK_CHROMIUM", "chromium", "chromium-browser", "google-chrome")
}

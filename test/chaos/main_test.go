package chaos

import (
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/bintest"
)

var (
	minKills = flag.Int("kills", 20, "SIGKILLs the chaos run makes, at least")
	minOps   = flag.Int("ops", 1000, "acknowledged operations the chaos run makes, at least")
	agents   = flag.Int("agents", 8, "agents in the chaos run (a quarter of them over HTTP)")
)

// simlockBin is the binary under test, built by TestMain when enabled.
var simlockBin, moduleRoot string

var consultOnce sync.Once

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("SIMLOCK_CHAOS") == "" {
		os.Exit(m.Run()) // the tests skip
	}
	root, err := bintest.ModuleRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "simlock-chaos-bin")
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		os.Exit(1)
	}
	moduleRoot = root
	simlockBin, err = bintest.Build(root, dir)
	code := 1
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// enabled skips t unless SIMLOCK_CHAOS is set, and makes go test's cache
// follow the sources of the binary it runs.
func enabled(t *testing.T) {
	t.Helper()
	if os.Getenv("SIMLOCK_CHAOS") == "" {
		t.Skip("chaos tests are opt-in: set SIMLOCK_CHAOS=1")
	}
	var err error
	consultOnce.Do(func() { err = bintest.ConsultSources(moduleRoot) })
	if err != nil {
		t.Fatal(err)
	}
}

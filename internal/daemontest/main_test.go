package daemontest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started outlives
// them: a daemon the harness started and did not stop would.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

package simworker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started outlives
// them: a connection the worker serves, or a gateway the harness started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

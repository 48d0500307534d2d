package uplink

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started outlives
// them: every Conn runs two, and its close one more.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

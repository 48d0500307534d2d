package postgres

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/simlock/simlock/internal/store"
)

var storetestWorker = store.Worker{ID: "w1", Label: "one", LastSeq: 3, TokenID: "tok"}

// TestMain fails the package's tests if a goroutine they started outlives
// them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

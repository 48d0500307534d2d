package sqlite

import (
	"testing"

	"github.com/simlock/simlock/internal/store/storetest"
)

// The SQLite backend gives the answers every backend gives (the in-memory
// one included).
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		db, _ := openTemp(t)
		return db
	})
}

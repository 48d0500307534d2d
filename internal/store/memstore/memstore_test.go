package memstore_test

import (
	"testing"

	"github.com/simlock/simlock/internal/store/memstore"
	"github.com/simlock/simlock/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) storetest.Backend { return memstore.New() })
}

package daemon

import (
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// A gateway may keep its state in PostgreSQL; a worker refuses to,
// naming the URL without its password.
func TestStoreAllowed(t *testing.T) {
	const url = "postgres://simlock:hunter2-secret@db.example/simlock"
	if err := storeAllowed("worker", "sqlite"); err != nil {
		t.Errorf("a worker on sqlite: %v", err)
	}
	if err := storeAllowed(contract.ModeGateway, "sqlite"); err != nil {
		t.Errorf("a gateway on sqlite: %v", err)
	}
	if err := storeAllowed(contract.ModeGateway, url); err != nil {
		t.Errorf("a gateway on PostgreSQL: %v", err)
	}
	err := storeAllowed("worker", url)
	if err == nil || !strings.Contains(err.Error(), "only a gateway") {
		t.Errorf("a worker on PostgreSQL = %v; want the refusal", err)
	}
	if err != nil && strings.Contains(err.Error(), "hunter2-secret") {
		t.Errorf("the refusal prints the password: %v", err)
	}
}

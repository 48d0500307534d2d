package daemon

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
)

// Concurrent repeats of one idempotency key, the retry after a network
// error, are decided in the decision step: with capacity full and noWait,
// every copy gets the first's NO_CAPACITY (none an INTERNAL from the
// store's unique key on requester and key), and the daemon goes on
// deciding.
func TestConcurrentRepeatsOfAnIdempotencyKeyGetTheFirstsAnswer(t *testing.T) {
	cfg, err := config.Default().Override("capacity.strategy", "fixed")
	if err == nil {
		cfg, err = cfg.Override("capacity.config.maxRunning", "1")
	}
	if err != nil {
		t.Fatal(err)
	}
	d, home := startDaemon(t, cfg)
	ctx := context.Background()
	if _, err := dial(t, home, "holder", false).RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil); err != nil {
		t.Fatal(err)
	}
	const rounds, copies = 20, 8
	sessions := make([]*client.Client, copies)
	for i := range sessions {
		sessions[i] = dial(t, home, "agent", false)
	}
	for round := range rounds {
		key := fmt.Sprintf("retry-%d", round)
		var wg sync.WaitGroup
		codes := make([]contract.Code, copies)
		for i := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := sessions[i].RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, NoWait: true, IdempotencyKey: key}, nil)
				codes[i] = code(err)
			}()
		}
		wg.Wait()
		for i, c := range codes {
			if c != contract.CodeNoCapacity {
				t.Fatalf("round %d: copy %d of key %s answered %s, want the first's NO_CAPACITY (all: %v)", round, i, key, c, codes)
			}
		}
	}
	if err := d.engine.Err(); err != nil {
		t.Fatalf("the engine stopped deciding: %v", err)
	}
}

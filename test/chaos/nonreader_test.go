package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// nonReaders is how many sessions subscribe to events and never read.
const nonReaders = 100

// Sessions that subscribe to events and then read nothing are closed by the
// daemon once their queued frames pass its bound, and the memory they held
// is given back: the daemon's RSS returns to within 20 MB of where it was.
func TestSessionsThatNeverReadAreClosedAndTheirMemoryGivenBack(t *testing.T) {
	enabled(t)
	h := newHome(t, append([]string{"capacity.strategy", "fixed", "capacity.config.maxRunning", "4"}, fastDemo...)...)
	h.start()
	ctx := context.Background()
	busy := make([]string, 4)
	clients := make([]interface {
		Renew(context.Context, string, int64) (contract.LeaseRecord, error)
	}, 4)
	for i := range busy {
		c, err := h.dial(ctx, "busy-"+string(rune('a'+i)), false)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: []contract.Platform{contract.PlatformIOS, contract.PlatformAndroid}[i%2], TimeoutMs: 30_000}, nil)
		if err != nil {
			t.Fatal(err)
		}
		busy[i], clients[i] = g.Lease.ID, c
	}
	renewAll := func(rounds int) {
		var wg sync.WaitGroup
		for i := range busy {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					if _, err := clients[i].Renew(ctx, busy[i], 0); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	renewAll(200) // the daemon's working set, before the sleepers
	start := h.rss()

	token, err := os.ReadFile(filepath.Join(h.Dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	hello, _ := json.Marshal(map[string]any{"id": "1", "op": "hello", "input": map[string]any{
		"protocol": map[string]int{"min": contract.ProtocolMin, "max": contract.ProtocolMax}, "principal": "sleeper",
		"adminToken": strings.TrimSpace(string(token))}})
	sleepers := make([]net.Conn, nonReaders)
	for i := range sleepers {
		c, err := net.Dial("unix", h.socket())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for _, frame := range []string{string(hello), `{"id":"2","op":"events.subscribe"}`} {
			if _, err := c.Write([]byte(frame + "\n")); err != nil {
				t.Fatal(err)
			}
			if line, err := r.ReadBytes('\n'); err != nil || strings.Contains(string(line), `"error"`) {
				t.Fatalf("sleeper %d: %s: %s %v", i, frame, line, err)
			}
		}
		sleepers[i] = c
	}
	// Far more events than a sleeper's outbox and socket buffers hold.
	renewAll(1500)

	// Every sleeper's connection has been closed by the daemon: what was
	// written before can still be read, then the stream ends.
	open := 0
	for _, c := range sleepers {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				open++
			}
		}
		c.Close()
	}
	if open > 0 {
		t.Fatalf("%d of %d sessions that never read are still open", open, nonReaders)
	}
	if _, err := clients[0].Renew(ctx, busy[0], 0); err != nil {
		t.Fatalf("the daemon stopped serving others: %v", err)
	}
	// Given back within a bound: the daemon waits for a burst of drops to
	// end, then returns their memory at once.
	closed := time.Now()
	bound := time.After(5 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	end := h.rss()
	for end-start > 20<<20 {
		select {
		case <-bound:
			t.Fatalf("RSS %.1f MB 5s after the sessions were closed, %.1f MB above the %.1f MB before them; want within 20 MB",
				mb(end), mb(end-start), mb(start))
		case <-tick.C:
			end = h.rss()
		}
	}
	t.Logf("non-readers: RSS %.1f MB before %d sessions that never read, %.1f MB %v after they were closed",
		mb(start), nonReaders, mb(end), time.Since(closed).Round(time.Millisecond))
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// A session that subscribes to events and then never reads is dropped once
// its frames pile up: the daemon closes the connection (the client reads
// what was in flight, then the end), forgets the session and its queued
// frames, and serves everyone else meanwhile.
func TestASessionThatDoesNotReadIsClosed(t *testing.T) {
	d, home := startDaemon(t, nil)
	ctx := context.Background()
	tok, err := os.ReadFile(filepath.Join(home, AdminTokenName))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("unix", SocketPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	r := bufio.NewReader(raw)
	hello, _ := json.Marshal(map[string]any{"id": "1", "op": "hello", "input": map[string]any{
		"protocol": map[string]int{"min": contract.ProtocolMin, "max": contract.ProtocolMax}, "principal": "sleeper", "adminToken": strings.TrimSpace(string(tok))}})
	for _, frame := range []string{string(hello), `{"id":"2","op":"events.subscribe"}`} {
		if _, err := raw.Write([]byte(frame + "\n")); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadBytes('\n')
		if err != nil || strings.Contains(string(line), `"error"`) {
			t.Fatalf("%s: %s %v", frame, line, err)
		}
	}
	open := d.connsNow()
	if len(open) != 1 {
		t.Fatalf("%d connections, want the sleeper's alone", len(open))
	}
	sleeper := open[0]

	// Other sessions make events (every renewal is one) while the sleeper
	// reads nothing: far more than its outbox and the socket buffers hold.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, home, "busy-"+string(rune('a'+i)), false)
			platform := []contract.Platform{contract.PlatformIOS, contract.PlatformAndroid}[i%2] // within both running limits
			g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: platform, RequesterID: "busy-" + string(rune('a'+i))}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			for range 1500 {
				if _, err := c.Renew(ctx, g.Lease.ID, 0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()

	// The daemon goes on serving others, and has let go of the sleeper.
	if _, err := dial(t, home, "other", false).Status(ctx); err != nil {
		t.Fatalf("status for another session: %v", err)
	}
	if slices.Contains(d.connsNow(), sleeper) {
		t.Errorf("the daemon still keeps the session of the sleeper, which read nothing")
	}
	// Closed at once, while it still reads nothing (not when a write
	// deadline or its reading would end the write).
	if err := sleeper.nc.SetReadDeadline(time.Time{}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the sleeper's connection is still open on the daemon's side (%v)", err)
	}
	sleeper.wmu.Lock()
	queued := len(sleeper.outbox)
	sleeper.wmu.Unlock()
	if queued != 0 {
		t.Errorf("the dropped session still holds %d queued frames", queued)
	}
	// What was in flight can be read; then the connection ends.
	// At once: well within flushTimeout, the wait a closing session that
	// still reads would get.
	_ = raw.SetReadDeadline(time.Now().Add(flushTimeout / 2))
	_, err = io.Copy(io.Discard, r)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the daemon kept the connection of a session that did not read open: no end of stream within %s", flushTimeout/2)
	}
}

// A call written whole before the client closed is carried out, though its
// answer cannot be delivered: a renewal sent right before a close renews,
// every time (it was lost about half the time when the failed write of the
// hello's answer stopped the reading too).
func TestACallWrittenBeforeTheCloseIsCarriedOut(t *testing.T) {
	_, home := startDaemon(t, nil)
	ctx := context.Background()
	holder := dial(t, home, "rr", false)
	g, err := holder.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	events, _, err := dial(t, home, "ops", true).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		ttl := int64(60_000 + i*1000)
		raw, err := net.Dial("unix", SocketPath(home))
		if err != nil {
			t.Fatal(err)
		}
		hello, _ := json.Marshal(map[string]any{"id": "1", "op": "hello", "input": map[string]any{
			"protocol": map[string]int{"min": contract.ProtocolMin, "max": contract.ProtocolMax}, "principal": "rr"}})
		renew, _ := json.Marshal(map[string]any{"id": "2", "op": "lease.renew", "input": map[string]any{"leaseId": g.Lease.ID, "ttlMs": ttl}})
		if _, err := raw.Write(append(append(hello, '\n'), append(renew, '\n')...)); err != nil {
			t.Fatal(err)
		}
		raw.Close()
		bound := time.After(5 * time.Second)
	wait:
		for {
			select {
			case ev := <-events:
				var p struct {
					TTLMs int64 `json:"ttlMs"`
				}
				if ev.Event == "lease.renewed" && json.Unmarshal(ev.Payload, &p) == nil && p.TTLMs == ttl {
					break wait
				}
			case <-bound:
				t.Fatalf("renewal %d (ttlMs %d), written whole before the client closed, was not carried out", i, ttl)
			}
		}
	}
}

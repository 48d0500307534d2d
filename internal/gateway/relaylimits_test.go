package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// The names a gateway relays are the worker events of docs/EVENTS.md:
// every event its tables list but the Fleet section's (a gateway's own).
func TestTheEventsAGatewayRelaysAreTheWorkerEventsOfEventsMD(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "EVENTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	doc = doc[strings.Index(doc, "## Every event"):]
	doc = doc[:strings.Index(doc[3:], "\n## ")+3]
	name := regexp.MustCompile("`([a-z][a-z-]*\\.[a-z.-]+)`")
	documented := map[string]bool{}
	for _, sec := range strings.Split(doc, "\n### ")[1:] {
		if strings.HasPrefix(sec, "Fleet") {
			continue
		}
		inTable := false
		for _, line := range strings.Split(sec, "\n") {
			switch {
			case strings.HasPrefix(line, "| Event |"):
				inTable = true
			case !strings.HasPrefix(line, "|"):
				inTable = false
			case inTable && !strings.HasPrefix(line, "|---"):
				for _, m := range name.FindAllStringSubmatch(strings.Split(line, "|")[1], -1) {
					documented[m[1]] = true
				}
			}
		}
	}
	if len(documented) < 30 {
		t.Fatalf("found %d worker events in docs/EVENTS.md; the parse no longer matches its tables", len(documented))
	}
	want, got := slices.Sorted(maps.Keys(documented)), slices.Sorted(maps.Keys(workerEvents))
	if !slices.Equal(got, want) {
		t.Errorf("the events a gateway relays\n%v\nare not the worker events docs/EVENTS.md lists\n%v", got, want)
	}
	for _, own := range []string{"worker.connected", "request.dispatched", "grant.recorded", "worker.rejected"} {
		if workerEvents[own] {
			t.Errorf("%s, a gateway's own event, is relayed from a worker", own)
		}
	}
}

func TestATokenBucketAllowsItsBurstThenItsRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newTokenBucket(10, 5, t0)
	n := 0
	for range 100 {
		if b.take(t0) {
			n++
		}
	}
	if n != 5 {
		t.Errorf("at once: %d taken, want the burst of 5", n)
	}
	if b.take(t0.Add(50 * time.Millisecond)) {
		t.Error("a token 50 ms later, at 10 a second")
	}
	if !b.take(t0.Add(100 * time.Millisecond)) {
		t.Error("no token 100 ms later, at 10 a second")
	}
	n = 0
	for range 100 {
		if b.take(t0.Add(time.Hour)) {
			n++
		}
	}
	if n != 5 {
		t.Errorf("after an hour idle: %d taken, want the burst of 5, not more", n)
	}
	if b.take(t0.Add(time.Hour - time.Minute)) {
		t.Error("a clock that stepped back gave a token")
	}
}

// A worker's relayed events are the names a worker records, within its
// rate: a flood over it and names it may not relay (a fake gateway event)
// are dropped and counted on its view, never waited for, and the cursor
// moves past them.
func TestRelayedEventsOverTheRateOrOfGatewayNamesAreDroppedAndCounted(t *testing.T) {
	var relayed []contract.Event
	var cursor int64
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw", RelayRate: 1, RelayBurst: 100,
		Relay: func(_ context.Context, _ string, evs []contract.Event, last int64) error {
			relayed = append(relayed, evs...)
			cursor = last
			return nil
		}})
	f.put(contract.WorkerView{ID: "w1", Connection: contract.WorkerConnected})
	f.mu.Lock()
	w := f.workers["w1"]
	f.mu.Unlock()
	var batch []contract.Event
	for i := range 1000 {
		name := "lease.granted"
		if i%10 == 0 {
			name = "request.dispatched"
		}
		batch = append(batch, contract.Event{ID: fmt.Sprintf("evt_%d", i), Seq: int64(i + 1), Timestamp: 1, Event: name, Payload: json.RawMessage(`{}`)})
	}
	start := time.Now()
	if reason, _ := f.relay(context.Background(), w, "w1", batch, 1000); reason != "" {
		t.Fatalf("the flood ended the uplink: %s", reason)
	}
	// The burst, and at most one more the rate of one a second refilled.
	if len(relayed) < 100 || len(relayed) > 101 || cursor != 1000 {
		t.Errorf("relayed %d events with the cursor at %d, want the burst of 100 and the cursor past the flood", len(relayed), cursor)
	}
	for _, ev := range relayed {
		if ev.Event != "lease.granted" {
			t.Fatalf("relayed a %s from a worker", ev.Event)
		}
	}
	v, _ := f.View("w1")
	if v.Findings == nil || v.Findings.EventsRefused != 100 || v.Findings.EventsDropped+int64(len(relayed)) != 900 {
		t.Errorf("findings = %+v, want 100 refused names and the rest of the 900 over the rate dropped", v.Findings)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("relaying the flood took %s: it waited for the rate", d)
	}
}

// A relayed event's time is the worker's claim, and the gateway's log is
// pruned by time: an event stamped at the epoch would take every older
// seq of the gateway's own log with it at the next prune, and one stamped
// years ahead would count in a far minute of the usage figures. The
// gateway keeps a worker's time only when it is not after its own and at
// most a day before it; any other is the gateway's time of the relay.
func TestARelayedEventsTimeIsBoundedByTheGatewaysClock(t *testing.T) {
	var relayed []contract.Event
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw",
		Relay: func(_ context.Context, _ string, evs []contract.Event, _ int64) error {
			relayed = append(relayed, evs...)
			return nil
		}})
	f.put(contract.WorkerView{ID: "w1", Connection: contract.WorkerConnected})
	f.mu.Lock()
	w := f.workers["w1"]
	f.mu.Unlock()
	before := time.Now().UnixMilli()
	hourAgo := before - time.Hour.Milliseconds()
	stamps := []int64{1, hourAgo, before - 25*time.Hour.Milliseconds(), before + 10*365*24*time.Hour.Milliseconds()}
	var batch []contract.Event
	for i, ts := range stamps {
		batch = append(batch, contract.Event{ID: fmt.Sprintf("evt_%d", i), Seq: int64(i + 1), Timestamp: ts, Event: "queue.changed", Payload: json.RawMessage(`{}`)})
	}
	if reason, _ := f.relay(context.Background(), w, "w1", batch, int64(len(batch))); reason != "" {
		t.Fatalf("the relay ended the uplink: %s", reason)
	}
	after := time.Now().UnixMilli()
	if len(relayed) != len(stamps) {
		t.Fatalf("relayed %d events, want %d", len(relayed), len(stamps))
	}
	for i, ev := range relayed {
		switch {
		case stamps[i] == hourAgo && ev.Timestamp != hourAgo:
			t.Errorf("an event an hour old was relayed at %d, want the worker's own time %d", ev.Timestamp, hourAgo)
		case stamps[i] != hourAgo && (ev.Timestamp < before || ev.Timestamp > after):
			t.Errorf("an event the worker stamped %d was relayed at %d, want the gateway's time of the relay (%d..%d)", stamps[i], ev.Timestamp, before, after)
		}
	}
}

// workerTime is the one rule for a time a worker reports: its own clock
// within a day before the gateway's and never after it, else the
// gateway's.
func TestAWorkersTimeIsKeptOnlyWithinADayBeforeTheGateways(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	day := (24 * time.Hour).Milliseconds()
	for _, c := range []struct {
		at, want int64
	}{
		{now.UnixMilli() - 1000, now.UnixMilli() - 1000},
		{now.UnixMilli() - day, now.UnixMilli() - day},
		{now.UnixMilli() - day - 1, now.UnixMilli()},
		{now.UnixMilli(), now.UnixMilli()},
		{now.UnixMilli() + 1, now.UnixMilli()},
		{0, now.UnixMilli()},
		{-5, now.UnixMilli()},
	} {
		if got := workerTime(c.at, now); got != c.want {
			t.Errorf("workerTime(%d) = %d, want %d", c.at, got, c.want)
		}
	}
}

// A relayed event's payload is at most maxRelayedPayload: what a worker
// records is a few hundred bytes (an error at most a few KiB), and the
// gateway's log is bounded in events, so an event of a megabyte, at the
// relay's rate, would fill the gateway's disk instead. A larger one is
// dropped and counted as refused, and the uplink stays.
func TestARelayedEventOverThePayloadBoundIsRefusedAndCounted(t *testing.T) {
	var relayed []contract.Event
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw",
		Relay: func(_ context.Context, _ string, evs []contract.Event, _ int64) error {
			relayed = append(relayed, evs...)
			return nil
		}})
	f.put(contract.WorkerView{ID: "w1", Connection: contract.WorkerConnected})
	f.mu.Lock()
	w := f.workers["w1"]
	f.mu.Unlock()
	big := json.RawMessage(`{"error":"` + strings.Repeat("x", maxRelayedPayload) + `"}`)
	batch := []contract.Event{
		{ID: "evt_1", Seq: 1, Timestamp: 1, Event: "device.quarantined", Payload: big},
		{ID: "evt_2", Seq: 2, Timestamp: 1, Event: "device.quarantined", Payload: json.RawMessage(`{"deviceId":"dev_1","error":"erase failed"}`)},
	}
	if reason, _ := f.relay(context.Background(), w, "w1", batch, 2); reason != "" {
		t.Fatalf("the large event ended the uplink: %s", reason)
	}
	if len(relayed) != 1 || relayed[0].ID != "evt_2" {
		t.Errorf("relayed %d events, want the small one alone", len(relayed))
	}
	if v, _ := f.View("w1"); v.Findings == nil || v.Findings.EventsRefused != 1 {
		t.Errorf("findings = %+v, want the large event counted as refused", v.Findings)
	}
}

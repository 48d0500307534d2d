package decisionlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// logged runs evs through a Log writing JSON at level and returns its
// records, the time dropped.
func logged(t *testing.T, gateway bool, level slog.Level, evs ...contract.Event) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	l := New(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level})), gateway)
	for _, ev := range evs {
		l.Record(ev)
	}
	l.Close()
	var out []map[string]any
	for line := range strings.Lines(buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a record is not JSON: %v: %s", err, line)
		}
		delete(m, "time")
		out = append(out, m)
	}
	return out
}

func ev(seq, ts int64, name, payload string) contract.Event {
	return contract.Event{ID: "evt_x", Seq: seq, Timestamp: ts, Event: name, Payload: json.RawMessage(payload)}
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A lease's story: its request, its grant with the wait since the request,
// its renewal at debug only, and its end with the request and requester
// its event does not name; a secret-looking field no entry names is not
// copied.
func TestALeasesDecisionsAreLoggedWithTheirIds(t *testing.T) {
	evs := []contract.Event{
		ev(1, 1000, contract.EvLeaseRequested, `{"requestId":"req_1","requester":"agent-a","requestSpec":{"platform":"ios"},"waitPolicy":{"noWait":false,"ttlMs":900000}}`),
		ev(2, 1000, contract.EvLeaseQueued, `{"requestId":"req_1","queuePosition":1}`),
		ev(3, 1000, contract.EvQueueChanged, `{"depth":1}`),
		ev(4, 1250, contract.EvLeaseGranted, `{"leaseId":"lse_1","requestId":"req_1","deviceId":"dev_1","requester":"agent-a","source":"warm","mode":"full"}`),
		ev(5, 1300, contract.EvLeaseRenewed, `{"leaseId":"lse_1","ttlMs":900000,"ttlDeadline":901300}`),
		ev(6, 1400, contract.EvLeaseReleased, `{"leaseId":"lse_1","deviceId":"dev_1","ownerId":"agent-a","reason":"explicit","secret":"s3cr3t"}`),
	}
	want := []string{
		`{"event":"lease.requested","level":"INFO","msg":"lease requested","platform":"ios","requestId":"req_1","requester":"agent-a","seq":1}`,
		`{"event":"lease.queued","level":"INFO","msg":"request queued","queuePosition":1,"requestId":"req_1","seq":2}`,
		`{"deviceId":"dev_1","event":"lease.granted","leaseId":"lse_1","level":"INFO","mode":"full","msg":"lease granted","requestId":"req_1","requester":"agent-a","seq":4,"source":"warm","waitMs":250}`,
		`{"deviceId":"dev_1","event":"lease.released","leaseId":"lse_1","level":"INFO","msg":"lease ended","reason":"explicit","requestId":"req_1","requester":"agent-a","seq":6}`,
	}
	got := logged(t, false, slog.LevelInfo, evs...)
	if len(got) != len(want) {
		t.Fatalf("logged %d records at info, want %d:\n%v", len(got), len(want), got)
	}
	for i := range want {
		if g := asJSON(got[i]); g != want[i] {
			t.Errorf("record %d\n got %s\nwant %s", i, g, want[i])
		}
	}
	debug := logged(t, false, slog.LevelDebug, evs...)
	if len(debug) != 5 || debug[3]["msg"] != "lease renewed" || debug[3]["leaseId"] != "lse_1" {
		t.Errorf("at debug the renewal is not the fourth record: %v", debug)
	}
}

// An expired lease ends with reason expired; a refused request says its
// code; a gateway's grant keeps the wait its event gives.
func TestEndsRefusalsAndAGatewaysGrantSayWhy(t *testing.T) {
	got := logged(t, false, slog.LevelInfo,
		ev(1, 0, contract.EvLeaseExpired, `{"leaseId":"lse_9","deviceId":"dev_9","ownerId":"agent-b"}`),
		ev(2, 0, contract.EvLeaseRejected, `{"requestId":"req_2","requester":"agent-c","requestSpec":{"platform":"android"},"reason":"no-wait","code":"NO_CAPACITY"}`),
	)
	if len(got) != 2 || got[0]["reason"] != "expired" || got[0]["requester"] != "agent-b" || got[0]["msg"] != "lease ended" {
		t.Errorf("expiry logged as %v", got)
	}
	if len(got) == 2 && (got[1]["code"] != "NO_CAPACITY" || got[1]["reason"] != "no-wait" || got[1]["msg"] != "request refused") {
		t.Errorf("refusal logged as %v", got[1])
	}
	gw := logged(t, true, slog.LevelInfo,
		ev(1, 100, contract.EvLeaseRequested, `{"requestId":"req_g","requester":"agent-d","requestSpec":{"platform":"ios"}}`),
		ev(2, 900, contract.EvGrantRecorded, `{"requestId":"req_g","leaseId":"lse_g","workerId":"ins_w","deviceId":"dev_w","requesterId":"agent-d","source":"warm","platform":"ios","waitMs":777}`),
	)
	if len(gw) != 2 || gw[1]["waitMs"] != float64(777) || gw[1]["requester"] != "agent-d" || gw[1]["workerId"] != "ins_w" {
		t.Errorf("a gateway's grant logged as %v", gw)
	}
}

// A gateway logs its own decisions and leaves out what it relays from its
// workers (their payloads name the worker); a worker logs a worker's
// events whatever they carry.
func TestAGatewayLeavesOutRelayedEvents(t *testing.T) {
	evs := []contract.Event{
		ev(1, 0, contract.EvLeaseGranted, `{"leaseId":"lse_1","requestId":"req_w","deviceId":"dev_1","requester":"gw:agent","source":"warm","workerId":"ins_w"}`),
		ev(2, 0, contract.EvWorkerConnected, `{"workerId":"ins_w","label":"mac-1","version":"1.0","protocol":3}`),
		ev(3, 0, contract.EvLeaseRequested, `{"requestId":"req_g","requester":"agent","requestSpec":{"platform":"ios"}}`),
	}
	var msgs []string
	for _, r := range logged(t, true, slog.LevelInfo, evs...) {
		msgs = append(msgs, r["msg"].(string))
	}
	if !slices.Equal(msgs, []string{"worker joined", "lease requested"}) {
		t.Errorf("a gateway logged %q, want its own worker joined and lease requested", msgs)
	}
	if n := len(logged(t, false, slog.LevelInfo, evs[0])); n != 1 {
		t.Errorf("a worker logged %d records of its own grant, want 1", n)
	}
}

// Events the table does not name (capacity, queue depth, catalog) are not
// logged at any level.
func TestEventsNotInTheTableAreNotLogged(t *testing.T) {
	got := logged(t, false, slog.LevelDebug,
		ev(1, 0, contract.EvCapacityChanged, `{"strategy":"fixed"}`),
		ev(2, 0, contract.EvQueueChanged, `{"depth":0}`),
		ev(3, 0, contract.EvCatalogChanged, `{"platform":"ios"}`),
	)
	if len(got) != 0 {
		t.Errorf("logged %v, want nothing", got)
	}
}

// Each entry names an event the daemon records, once, with a message.
func TestTheTableNamesKnownEventsOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Entries {
		if !slices.Contains(contract.EventNames(), e.Event) {
			t.Errorf("entry %q names no event of contract/eventnames.go", e.Event)
		}
		if seen[e.Event] {
			t.Errorf("entry %q is in the table twice", e.Event)
		}
		seen[e.Event] = true
		if e.Message == "" {
			t.Errorf("entry %q has no message", e.Event)
		}
	}
}

// Records from many goroutines at once (a gateway publishes from several)
// each give their one line, and the joins stay whole.
func TestRecordsFromManyGoroutinesAreEachLoggedOnce(t *testing.T) {
	var buf syncBuffer
	l := New(slog.New(slog.NewJSONHandler(&buf, nil)), false)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				id := fmt.Sprintf("%d-%d", g, i)
				l.Record(ev(0, 0, contract.EvLeaseGranted, `{"leaseId":"lse_`+id+`","requestId":"req_`+id+`","requester":"a"}`))
				l.Record(ev(0, 0, contract.EvLeaseReleased, `{"leaseId":"lse_`+id+`","ownerId":"a","reason":"explicit"}`))
			}
		})
	}
	wg.Wait()
	l.Close()
	out := buf.String()
	if g, e := strings.Count(out, `"msg":"lease granted"`), strings.Count(out, `"msg":"lease ended"`); g != 400 || e != 400 {
		t.Errorf("%d grant and %d end lines, want 400 each", g, e)
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "lease ended") && !strings.Contains(line, `"requestId":"req_`) {
			t.Errorf("an end line lacks its request: %s", line)
			break
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Close writes every record queued before it, and an event recorded after
// it (a stray publish while the daemon stops) is neither written nor a
// panic.
func TestCloseWritesWhatIsQueuedAndLaterRecordsAreDropped(t *testing.T) {
	var buf syncBuffer
	l := New(slog.New(slog.NewJSONHandler(&buf, nil)), false)
	for i := range 100 {
		l.Record(ev(int64(i), 0, contract.EvLeaseGranted, fmt.Sprintf(`{"leaseId":"lse_%d","requestId":"req_%d","requester":"a"}`, i, i)))
	}
	l.Close()
	if n := strings.Count(buf.String(), `"msg":"lease granted"`); n != 100 {
		t.Fatalf("%d grant lines after Close, want the 100 queued", n)
	}
	l.Record(ev(100, 0, contract.EvLeaseGranted, `{"leaseId":"lse_late","requestId":"req_late","requester":"a"}`))
	l.Close()
	if strings.Contains(buf.String(), "lse_late") {
		t.Error("an event recorded after Close was written")
	}
}

package browser

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/console"
)

// The tokens the fake daemon knows.
const (
	fakeOperator = "slk_fake-operator"
	fakeAgent    = "slk_fake-agent"
)

// fakeDaemon answers the console's /v1 reads from data the test sets,
// and serves the console itself with the real handler: for what a real
// daemon cannot be made to show on cue (thousands of devices and events
// at once, a daemon that stays starting, a stream the test pushes).
type fakeDaemon struct {
	srv *httptest.Server

	mu sync.Mutex
	// status is the body of GET /v1/status once starting is spent; each
	// answer while starting > 0 says the daemon is still starting.
	status   map[string]any
	starting int
	events   []map[string]any // stored, oldest first
	// push carries events to the open streams; lastEventIDs are the
	// Last-Event-ID each stream was opened with; streams counts those open.
	push         chan map[string]any
	lastEventIDs []string
	streams      int
	hits         map[string]int
	// usage is the answer to GET /v1/usage: a status and body (by default
	// an hour with nothing in it), or, with drop, a connection closed
	// unanswered.
	usage fakeAnswer
	// failed are the requests GET /v1/lease-requests?state=failed lists;
	// a retry of one answers a new request made with the same timeoutMs.
	failed []map[string]any
}

// fakeAnswer is what the fake daemon answers a route with.
type fakeAnswer struct {
	status int
	body   any
	drop   bool
}

func newFakeDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	f := &fakeDaemon{push: make(chan map[string]any, 20000), hits: map[string]int{}}
	f.status = fakeStatus(0, 0)
	f.usage = fakeAnswer{status: 200, body: fakeUsage(nil)}
	page := console.Handler()
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/", f.serveAPI)
	mux.Handle("/", page)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeDaemon) hit(route string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[route]
}

func (f *fakeDaemon) openStreams() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.streams
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": code, "message": message}})
}

func (f *fakeDaemon) serveAPI(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.hits[r.URL.Path]++
	f.mu.Unlock()
	secret := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if secret != fakeOperator && secret != fakeAgent {
		apiError(w, 401, "UNAUTHENTICATED", "unknown token")
		return
	}
	if r.URL.Path == "/v1/status" {
		f.mu.Lock()
		st := f.status
		if f.starting > 0 {
			f.starting--
			st = map[string]any{"daemon": map[string]any{"mode": "worker", "health": "starting", "version": "fake"}, "host": map[string]any{}}
		}
		f.mu.Unlock()
		writeJSON(w, 200, st)
		return
	}
	if secret != fakeOperator {
		apiError(w, 403, "FORBIDDEN", "an operator route")
		return
	}
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/devices/") && strings.HasSuffix(r.URL.Path, "/retry") {
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/devices/"), "/retry")
		apiError(w, 409, "NOT_RETRYABLE", "device "+id+" is being cleaned already; only a quarantined device can be retried")
		return
	}
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/lease-requests/") && strings.HasSuffix(r.URL.Path, "/retry") {
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/lease-requests/"), "/retry")
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, q := range f.failed {
			if q["id"] == id {
				f.failed = append(f.failed[:i:i], f.failed[i+1:]...)
				writeJSON(w, 201, map[string]any{"request": map[string]any{"id": id + "_again", "state": "queued", "requesterId": q["requesterId"],
					"waitPolicy": q["waitPolicy"]}})
				return
			}
		}
		apiError(w, 404, "UNKNOWN_LEASE_REQUEST", "no lease request "+id)
		return
	}
	switch r.URL.Path {
	case "/v1/events":
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		f.mu.Lock()
		evs := f.events
		if limit > 0 && len(evs) > limit {
			evs = evs[len(evs)-limit:]
		}
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"events": evs})
	case "/v1/events/stream":
		f.stream(w, r)
	case "/v1/tokens":
		writeJSON(w, 200, map[string]any{"tokens": []any{
			map[string]any{"id": "tok_0123456789abcdef", "role": "agent", "label": "ci-runner-7"},
		}})
	case "/v1/workers":
		writeJSON(w, 200, map[string]any{"mode": "worker", "workers": []any{map[string]any{"id": "ins_fake", "label": "fake", "connection": "connected"}}})
	case "/v1/lease-requests":
		f.mu.Lock()
		failed := []any{}
		if r.URL.Query().Get("state") == "failed" {
			for _, q := range f.failed {
				failed = append(failed, q)
			}
		}
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"requests": failed})
	case "/v1/jobs":
		writeJSON(w, 200, map[string]any{"jobs": []any{}})
	case "/v1/usage":
		f.mu.Lock()
		a := f.usage
		f.mu.Unlock()
		if a.drop {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		writeJSON(w, a.status, a.body)
	default:
		apiError(w, 404, "UNKNOWN_ROUTE", "no such route")
	}
}

// stream serves /v1/events/stream: the stored events after Last-Event-ID,
// then what the test pushes.
func (f *fakeDaemon) stream(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64)
	f.mu.Lock()
	f.lastEventIDs = append(f.lastEventIDs, r.Header.Get("Last-Event-ID"))
	f.streams++
	var replay []map[string]any
	for _, ev := range f.events {
		if ev["seq"].(int64) > after {
			replay = append(replay, ev)
		}
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.streams--
		f.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	fmt.Fprint(w, ": connected\n\n")
	send := func(ev map[string]any) error {
		b, _ := json.Marshal(ev)
		_, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", ev["seq"], b)
		return err
	}
	for _, ev := range replay {
		if send(ev) != nil {
			return
		}
	}
	fl.Flush()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-f.push:
			if send(ev) != nil {
				return
			}
			// A burst goes out in one write, as a daemon's would.
			for more := true; more; {
				select {
				case ev := <-f.push:
					if send(ev) != nil {
						return
					}
				default:
					more = false
				}
			}
			fl.Flush()
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// addEvents stores n more events and, when live, pushes them to the open
// streams.
func (f *fakeDaemon) addEvents(n int, live bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := []string{"lease.granted", "device.ready", "worker.connected", "component.installed", "capacity.changed", "lease.renewed"}
	for range n {
		seq := int64(len(f.events) + 1)
		ev := map[string]any{
			"id": fmt.Sprintf("evt_%016x", seq), "seq": seq, "timestamp": time.Now().UnixMilli(),
			"event": names[seq%int64(len(names))], "payload": map[string]any{"deviceId": fmt.Sprintf("dev_%016x", seq%500), "n": seq},
		}
		f.events = append(f.events, ev)
		if live {
			f.push <- ev
		}
	}
}

// fakeStatus is a worker's status with devices devices (a mix of
// states: some leased, some being created with a request waiting, a few
// quarantined or stalled) and waiting more requests in line.
func fakeStatus(devices, waiting int) map[string]any {
	now := time.Now().UnixMilli()
	states := []string{"ready", "leased", "leased", "shutdown", "provisioning", "reclaiming", "leased", "ready", "quarantined", "leased"}
	var devs, leases, wait []any
	for i := range devices {
		state := states[i%len(states)]
		id := fmt.Sprintf("dev_%016x", i)
		d := map[string]any{"id": id, "driver": "demo", "state": state, "createdAt": now - 3600000, "stateSince": now - int64(i)*1000,
			"spec": map[string]any{"platform": []string{"ios", "android"}[i%2], "model": []string{"iPhone 17", "Pixel 9"}[i%2], "osVersion": []string{"26.1", "36"}[i%2]}}
		if i%97 == 5 {
			d["stalled"] = true
			d["transitionAgeMs"] = 400000
		}
		if state == "leased" {
			lid := fmt.Sprintf("lse_%016x", i)
			d["leaseId"] = lid
			leases = append(leases, map[string]any{"id": lid, "deviceId": id, "requesterId": fmt.Sprintf("agent-%d", i), "ownerId": "x",
				"grantedAt": now - 60000, "ttlMs": 900000, "lastRenewedAt": now - 30000, "ttlDeadline": now + 870000 - int64(i)*1000})
		}
		if state == "provisioning" {
			wait = append(wait, map[string]any{"requestId": fmt.Sprintf("req_%016x", i), "requesterId": fmt.Sprintf("agent-%d", i),
				"requestSpec": map[string]any{"platform": "ios"}, "stage": "starting", "waitingMs": 5000, "deviceId": id,
				"progress": map[string]any{"stage": "booting", "etaMs": 2000}})
		}
		devs = append(devs, d)
	}
	for i := range waiting {
		wait = append(wait, map[string]any{"requestId": fmt.Sprintf("req_q%015x", i), "requesterId": fmt.Sprintf("queued-%d", i),
			"requestSpec": map[string]any{"platform": "android"}, "stage": "queued", "queuePosition": i + 1, "waitingMs": 1000 * i,
			"progress": map[string]any{"stage": "queued", "queuePosition": i + 1}})
	}
	capacity := map[string]any{
		"strategy":  "resource",
		"global":    map[string]any{"running": 10, "reserved": 0, "maxRunning": 12, "warm": 3},
		"ramBudget": map[string]any{"limitBytes": 8 << 30, "usedBytes": 9 << 30, "overLimit": true},
	}
	return map[string]any{
		"daemon":   map[string]any{"mode": "worker", "health": "running", "version": "fake", "startedAt": now - 3600000},
		"host":     map[string]any{"os": "linux", "arch": "amd64", "cpus": 2},
		"capacity": capacity,
		"devices":  devs,
		"leases":   leases,
		"waiting":  wait,
		"counts":   map[string]any{"devices": len(devs), "leases": len(leases), "waiting": len(wait)},
	}
}

// fakeUsage is a worker's usage figures of the last hour at one-minute
// buckets, ending now: granted[i] leases granted (and as many asked for)
// in the minute i from the end.
func fakeUsage(granted []int) map[string]any {
	now := time.Now().UnixMilli()
	from := (now/60000 - 59) * 60000
	series := make([]any, 60)
	total := 0
	for i := range series {
		n := 0
		if j := 59 - i; j < len(granted) {
			n = granted[j]
		}
		total += n
		series[i] = map[string]any{"at": from + int64(i)*60000, "requests": n, "granted": n, "rejected": 0}
	}
	wait := map[string]any{"p50": 0, "p90": 0, "p99": 0, "count": 0}
	if total > 0 {
		wait = map[string]any{"p50": 150, "p90": 900, "p99": 2400, "count": total}
	}
	return map[string]any{
		"from": from, "to": now, "bucket": "1m", "partial": false,
		"totals":      map[string]any{"requests": total, "granted": map[string]any{"warm": total}, "rejected": map[string]any{}, "cancelled": 0, "timedOut": 0},
		"percentiles": map[string]any{"wait": wait},
		"byPlatform":  map[string]any{},
		"series":      series,
	}
}

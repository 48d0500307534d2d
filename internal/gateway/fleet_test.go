package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/memstore"
)

// memStore is the shared in-memory store (memstore) as the fleet's Store;
// fail makes every write fail.
type memStore struct {
	*memstore.Store
	mu   sync.Mutex
	fail error
}

func newMemStore() *memStore { return &memStore{Store: memstore.New()} }

func (m *memStore) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fail
}

func (m *memStore) PutWorker(ctx context.Context, w store.Worker) error {
	if err := m.failure(); err != nil {
		return err
	}
	return m.Store.PutWorker(ctx, w)
}

func (m *memStore) DeleteWorker(ctx context.Context, id string) error {
	if err := m.failure(); err != nil {
		return err
	}
	return m.Store.DeleteWorker(ctx, id)
}

// worker is the stored record of worker id (zero if none).
func (m *memStore) worker(id string) store.Worker {
	ws, err := m.Workers(context.Background())
	if err != nil {
		panic(err)
	}
	for _, w := range ws {
		if w.ID == id {
			return w
		}
	}
	return store.Worker{}
}

// recorder keeps the events a Fleet emits.
type recorder struct {
	mu     sync.Mutex
	events []string
	last   map[string]any
}

func (r *recorder) emit(_ context.Context, event string, payload map[string]any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event)
	r.last = payload
	return nil
}

func (r *recorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func newFleet(t *testing.T, st *memStore) (*Fleet, *recorder) {
	t.Helper()
	rec := &recorder{}
	f := New(Options{Store: st, InstanceID: "ins_gw", Emit: rec.emit,
		Relay: func(context.Context, string, []contract.Event, int64) error { return nil }})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return f, rec
}

// put lists a worker with view v, connected or not, as Attach would have.
func (f *Fleet) put(v contract.WorkerView) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &worker{view: v}
	if v.Connection == contract.WorkerConnected {
		a, _ := net.Pipe()
		w.link = &link{conn: a}
	}
	f.workers[v.ID] = w
	f.reindex(w)
}

func capacity(running, maxRunning int) *contract.Capacity {
	return &contract.Capacity{Global: contract.GlobalCapacity{Running: running, MaxRunning: maxRunning},
		Platforms: map[contract.Platform]contract.PlatformCapacity{contract.PlatformIOS: {Running: running, MaxRunning: maxRunning, MaxDevices: maxRunning}}}
}

func TestTheSnapshotSumsTheConnectedWorkersAndTagsTheirRecords(t *testing.T) {
	f, _ := newFleet(t, newMemStore())
	f.put(contract.WorkerView{ID: "a", Connection: contract.WorkerConnected, Capacity: capacity(1, 2),
		Devices: []contract.Device{{ID: "d1", WorkerID: "a", State: contract.DeviceLeased}},
		Leases:  []contract.LeaseRecord{{ID: "l1", WorkerID: "a"}}, QueueDepth: 1})
	f.put(contract.WorkerView{ID: "b", Connection: contract.WorkerConnected, Capacity: capacity(0, 3), Drained: true})
	// A disconnected worker's last view is not the fleet's present.
	f.put(contract.WorkerView{ID: "c", Connection: contract.WorkerDisconnected, Capacity: capacity(4, 4),
		Devices: []contract.Device{{ID: "d9", WorkerID: "c"}}})
	s := f.Snapshot()
	if s.Capacity.Global.MaxRunning != 5 || s.Capacity.Global.Running != 1 || s.Capacity.Platforms[contract.PlatformIOS].MaxRunning != 5 {
		t.Errorf("capacity = %+v, want a's and b's summed: 1 of 5 running", s.Capacity)
	}
	if len(s.Devices) != 1 || s.Devices[0].ID != "d1" || len(s.Leases) != 1 || s.QueueDepth != 1 {
		t.Errorf("records = %+v %+v queue %d, want a's only", s.Devices, s.Leases, s.QueueDepth)
	}
	if s.Fleet.Connected != 2 || s.Fleet.Disconnected != 1 || s.Fleet.Drained != 1 || len(s.Fleet.Workers) != 3 {
		t.Errorf("fleet = %+v, want 2 connected, 1 disconnected, 1 drained, 3 lines", s.Fleet)
	}
	if s.Counts.Devices != 1 || s.Counts.DevicesByState[contract.DeviceLeased] != 1 || s.Counts.Leases != 1 {
		t.Errorf("counts = %+v", s.Counts)
	}
}

func TestTheCatalogIsTheUnionWithTheWorkersThatHaveEachModelAndRuntime(t *testing.T) {
	f, _ := newFleet(t, newMemStore())
	f.put(contract.WorkerView{ID: "a", Connection: contract.WorkerConnected, Catalog: []contract.Catalog{{Platform: contract.PlatformIOS,
		Models: []string{"iPhone 17"}, Runtimes: []string{"26.1"}, ModelClasses: map[string]contract.DeviceClass{"iPhone 17": "phone"}}}})
	f.put(contract.WorkerView{ID: "b", Connection: contract.WorkerConnected, Catalog: []contract.Catalog{{Platform: contract.PlatformIOS,
		Models: []string{"iPhone 17", "iPhone 16"}, Runtimes: []string{"18.6", "26.1"}}}})
	f.put(contract.WorkerView{ID: "c", Connection: contract.WorkerDisconnected, Catalog: []contract.Catalog{{Platform: contract.PlatformIOS,
		Models: []string{"iPhone 15"}}}})
	res := f.Catalog("")
	if len(res.Platforms) != 1 {
		t.Fatalf("platforms = %+v, want ios alone", res.Platforms)
	}
	c := res.Platforms[0]
	if !slices.Equal(c.Models, []string{"iPhone 17", "iPhone 16"}) || !slices.Equal(c.Runtimes, []string{"26.1", "18.6"}) {
		t.Errorf("models %v runtimes %v, want the connected workers' union", c.Models, c.Runtimes)
	}
	if !slices.Equal(c.ModelWorkers["iPhone 17"], []string{"a", "b"}) || !slices.Equal(c.ModelWorkers["iPhone 16"], []string{"b"}) ||
		!slices.Equal(c.RuntimeWorkers["18.6"], []string{"b"}) {
		t.Errorf("modelWorkers %v runtimeWorkers %v", c.ModelWorkers, c.RuntimeWorkers)
	}
	if c.ModelClasses["iPhone 17"] != "phone" {
		t.Errorf("modelClasses = %v, want a's class kept", c.ModelClasses)
	}
}

func TestADrainIsStoredBeforeItIsToldAndRemoveRefusesAConnectedWorker(t *testing.T) {
	st := newMemStore()
	f, rec := newFleet(t, st)
	f.put(contract.WorkerView{ID: "a", Label: "mac", Connection: contract.WorkerConnected})
	if _, err := f.Drain(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if !st.worker("a").Drained || !slices.Equal(rec.names(), []string{"worker.drained"}) {
		t.Errorf("after drain: stored %+v, events %v", st.worker("a"), rec.names())
	}
	// A restarted gateway lists it drained, disconnected, until it dials in.
	g, _ := newFleet(t, st)
	if v, err := g.View("a"); err != nil || !v.Drained || v.Connection != contract.WorkerDisconnected {
		t.Errorf("after a restart: %+v %v, want drained and disconnected", v, err)
	}
	st.fail = errors.New("disk full")
	if _, err := f.Undrain(t.Context(), "a"); err == nil {
		t.Error("undrain with a store that cannot write succeeded")
	}
	if v, _ := f.View("a"); !v.Drained || len(rec.names()) != 1 {
		t.Errorf("an undrain that was not stored changed the view (%+v) or was told (%v)", v, rec.names())
	}
	st.fail = nil
	if _, err := f.Remove(t.Context(), "a"); err == nil || !strings.Contains(err.Error(), string(contract.CodeWorkerConnected)) {
		t.Errorf("remove of a connected worker: %v, want WORKER_CONNECTED", err)
	}
	if _, err := f.Drain(t.Context(), "nobody"); err == nil || !strings.Contains(err.Error(), string(contract.CodeUnknownWorker)) {
		t.Errorf("drain of an unknown worker: %v, want UNKNOWN_WORKER", err)
	}
}

func TestRefusedUplinksAreRecordedOnceAMinuteWithTheAttemptsBetween(t *testing.T) {
	f, rec := newFleet(t, newMemStore())
	t0 := time.Unix(1000, 0)
	for i := range 5 {
		f.Rejected(t0.Add(time.Duration(i)*time.Second), contract.CodeUnauthenticated, "unknown or revoked token", "w1", "10.0.0.1")
	}
	if n := len(rec.names()); n != 1 {
		t.Fatalf("%d worker.rejected for 5 refusals in 5 s, want 1", n)
	}
	f.Rejected(t0.Add(time.Second), contract.CodeForbidden, "another role's token", "w1", "10.0.0.1")
	if n := len(rec.names()); n != 2 {
		t.Errorf("a refusal for another reason was not recorded at once (%d events)", n)
	}
	f.Rejected(t0.Add(rejectionEvery+time.Second), contract.CodeUnauthenticated, "unknown or revoked token", "w1", "10.0.0.1")
	if n := len(rec.names()); n != 3 || rec.last["attempts"] != 5 {
		t.Errorf("after a minute: %d events, last %v; want 3 and the 4 coalesced attempts plus this one (5)", n, rec.last)
	}
}

// Refused dials are coalesced by the address they came from, not by the
// worker id they claim: 2,000 dials with invented ids from one address
// are one event, and from 2,000 addresses a bounded number of events and
// of remembered addresses.
func TestRefusedDialsWithInventedIDsAreCoalescedByAddressAndBounded(t *testing.T) {
	f, rec := newFleet(t, newMemStore())
	t0 := time.Unix(1000, 0)
	for i := range 2000 {
		f.Rejected(t0.Add(time.Duration(i)*time.Millisecond), contract.CodeUnauthenticated, "unknown or revoked token",
			fmt.Sprintf("ins_invented_%d", i), "10.0.0.1")
	}
	if n := len(rec.names()); n != 1 {
		t.Errorf("2000 refused dials from one address with 2000 invented ids wrote %d worker.rejected, want 1", n)
	}
	for i := range 2000 {
		f.Rejected(t0.Add(2*time.Second+time.Duration(i)*time.Millisecond), contract.CodeUnauthenticated, "unknown or revoked token",
			fmt.Sprintf("ins_invented_%d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250))
	}
	if n := len(rec.names()); n > rejectionBurst {
		t.Errorf("2000 refused dials from 2000 addresses within a minute wrote %d worker.rejected, want at most %d", n, rejectionBurst)
	}
	f.mu.Lock()
	keys := len(f.rejected.byKey)
	f.mu.Unlock()
	if keys > maxRejectionKeys+1 {
		t.Errorf("the gateway remembers %d refused addresses, want at most %d and the one for the others", keys, maxRejectionKeys)
	}
	// The next minute tells what was held back, with the attempts.
	f.Rejected(t0.Add(2*time.Second+rejectionEvery+time.Minute), contract.CodeUnauthenticated, "unknown or revoked token", "", "10.1.7.149")
	if a, _ := rec.last["attempts"].(int); a < 2 {
		t.Errorf("an address held back by the burst was told with %v attempts, want its held-back one and this", rec.last["attempts"])
	}
}

func TestWithWorkerIDOverwritesTheWorkersOwnClaim(t *testing.T) {
	got, err := withWorkerID([]byte(`{"workerId":"forged","leaseId":"l1"}`), "real")
	if err != nil || string(got) != `{"leaseId":"l1","workerId":"real"}` {
		t.Errorf("withWorkerID = %s, %v", got, err)
	}
	if _, err := withWorkerID([]byte(`[1,2]`), "real"); err == nil {
		t.Error("a payload that is not an object was accepted")
	}
}

// checkEvent takes a payload exactly when it decodes into an object's
// keys (an object, or null), as it did when it decoded each one so.
func TestAnEventsPayloadIsAnObjectAsDecodingTellsIt(t *testing.T) {
	for _, in := range []string{`{}`, ` {"a":[1,{"b":null}]} `, `null`, ` null `, ``, ` `, `[]`, `"x"`, `1`, `true`,
		`{"a":1`, `{} {}`, `{"a":1}}`, `nul`, "{\"a\":\"\x01\"}"} {
		var obj map[string]json.RawMessage
		want := json.Unmarshal([]byte(in), &obj) == nil
		err := checkEvent(contract.Event{Seq: 1, ID: "evt_1", Event: "x", Payload: []byte(in)})
		if (err == nil) != want {
			t.Errorf("checkEvent of the payload %q = %v; decoding it as an object succeeds: %v", in, err, want)
		}
	}
}

// A payload that names no workerId keeps its bytes and gains the key at
// its end; one that names it in any spelling has it replaced, once.
func TestWithWorkerIDAddsTheKeyOnceWhateverTheWorkerWrote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{}`, `{"workerId":"w1"}`},
		{` { } `, `{ "workerId":"w1"}`},
		{`{"leaseId":"l1","n":[1,{"a":null}]}`, `{"leaseId":"l1","n":[1,{"a":null}],"workerId":"w1"}`},
		{`{"b":"<&>" , "a":1 }`, `{"b":"<&>" , "a":1 ,"workerId":"w1"}`},
		// Named already, or perhaps (an escape): decoded and encoded again.
		{`{"workerId":"forged","leaseId":"l1"}`, `{"leaseId":"l1","workerId":"w1"}`},
		{`{"worker\u0049d":"forged"}`, `{"workerId":"w1"}`},
		{`{"note":"a \"workerId\" in text"}`, `{"note":"a \"workerId\" in text","workerId":"w1"}`},
		{`{"a":{"workerId":"inner"}}`, `{"a":{"workerId":"inner"},"workerId":"w1"}`},
	} {
		got, err := withWorkerID([]byte(c.in), "w1")
		if err != nil || string(got) != c.want {
			t.Errorf("withWorkerID(%s) = %s, %v; want %s", c.in, got, err, c.want)
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(got, &obj); err != nil || string(obj["workerId"]) != `"w1"` {
			t.Errorf("withWorkerID(%s) = %s, which names workerId %s (%v)", c.in, got, obj["workerId"], err)
		}
	}
	for _, in := range []string{``, `null`, `[1,2]`, `"x"`, `{"a":1`, `{"a":1}}`, `{"a":1} {}`} {
		if got, err := withWorkerID([]byte(in), "w1"); err == nil {
			t.Errorf("withWorkerID(%q) = %s, want an error: not one JSON object", in, got)
		}
	}
}

func TestAStatusOutOfBoundsIsRefusedNamingTheField(t *testing.T) {
	good := contract.Status{Daemon: contract.DaemonInfo{Version: "1", Health: "running"}, Host: contract.HostInfo{OS: "linux", CPUs: 2}}
	if err := checkStatus(good); err != nil {
		t.Fatalf("a good status: %v", err)
	}
	for name, c := range map[string]struct {
		mutate func(*contract.Status)
		field  string
	}{
		"negative cpus":  {func(s *contract.Status) { s.Host.CPUs = -1 }, "host.cpus"},
		"unknown health": {func(s *contract.Status) { s.Daemon.Health = "great" }, "daemon.health"},
		"a gateway":      {func(s *contract.Status) { s.Daemon.Mode = contract.ModeGateway }, "daemon.mode"},
		"a bad state": {func(s *contract.Status) {
			s.Devices = []contract.Device{{ID: "d", Spec: contract.DeviceSpec{Platform: "ios"}, State: "on fire"}}
		}, "devices[0].state"},
		"a bad platform": {func(s *contract.Status) {
			s.Devices = []contract.Device{{ID: "d", Spec: contract.DeviceSpec{Platform: "tv"}, State: "ready"}}
		}, "devices[0].spec.platform"},
		"a long id": {func(s *contract.Status) {
			s.Leases = []contract.LeaseRecord{{ID: strings.Repeat("x", 300), DeviceID: "d", RequesterID: "r", OwnerID: "o"}}
		}, "leases[0].id"},
		"a control char": {func(s *contract.Status) { s.Daemon.Version = "1\x07" }, "daemon.version"},
		"a huge queue":   {func(s *contract.Status) { s.QueueDepth = 1 << 30 }, "queueDepth"},
		"a negative seq": {func(s *contract.Status) { s.EventSeq = -1 }, "eventSeq"},
		"a negative limit": {func(s *contract.Status) {
			s.Capacity = &contract.Capacity{Global: contract.GlobalCapacity{MaxRunning: -2}}
		}, "capacity.global.maxRunning"},
	} {
		s := good
		c.mutate(&s)
		err := checkStatus(s)
		if err == nil || !strings.HasPrefix(err.Error(), c.field+":") {
			t.Errorf("%s: %v, want an error naming %s", name, err, c.field)
		}
	}
}

func TestRelayedEventsMustCountUpFromTheSeqTheyFollow(t *testing.T) {
	ev := func(seq int64) contract.Event {
		return contract.Event{Seq: seq, ID: "evt_1", Timestamp: 1, Event: "lease.renewed", Payload: []byte(`{}`)}
	}
	if err := checkEvents(4, []contract.Event{ev(5), ev(6), ev(9)}); err != nil {
		t.Fatalf("seqs 5, 6, 9 after 4: %v", err)
	}
	for name, c := range map[string]struct {
		after int64
		evs   []contract.Event
		want  string
	}{
		"one at the seq it follows": {4, []contract.Event{ev(4)}, "event.seq: is 4, after seq 4"},
		"one before it":             {4, []contract.Event{ev(5), ev(3)}, "event.seq: is 3, after seq 5"},
		"the same seq twice":        {0, []contract.Event{ev(1), ev(1)}, "event.seq: is 1, after seq 1"},
		"an invalid event":          {0, []contract.Event{{Seq: 1, ID: "evt_1", Event: "x", Payload: []byte(`[]`)}}, "event.payload"},
		"a payload not UTF-8":       {0, []contract.Event{{Seq: 1, ID: "evt_1", Event: "x", Payload: []byte("{\"a\":\"\xff\"}")}}, "event.payload: is not UTF-8"},
	} {
		err := checkEvents(c.after, c.evs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: checkEvents = %v, want an error saying %q", name, err, c.want)
		}
	}
}

func TestAGrantOutOfBoundsIsRefusedNamingTheField(t *testing.T) {
	good := contract.LeaseGrant{
		Device:      contract.GrantDevice{ID: "dev_1", DriverDeviceID: "UDID", Spec: contract.DeviceSpec{Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.1"}, Mode: "full"},
		Lease:       contract.LeaseRecord{ID: "lse_1", DeviceID: "dev_1", RequesterID: "gw:ins_gw:a", OwnerID: "tok_a", TTLMs: 60000},
		Environment: map[string]string{"SIMLOCK_DEVICE_ID": "UDID"},
	}
	if err := checkGrant(good); err != nil {
		t.Fatalf("a good grant: %v", err)
	}
	for name, c := range map[string]struct {
		mutate func(*contract.LeaseGrant)
		field  string
	}{
		"a lease id the gateway cannot name": {func(g *contract.LeaseGrant) { g.Lease.ID = "lse.1" }, "grant.lease.id"},
		"no lease id":                        {func(g *contract.LeaseGrant) { g.Lease.ID = "" }, "grant.lease.id"},
		"a TTL out of range":                 {func(g *contract.LeaseGrant) { g.Lease.TTLMs = -1 }, "grant.lease.ttlMs"},
		"a device other than the lease's":    {func(g *contract.LeaseGrant) { g.Device.ID = "dev_2" }, "grant.device.id"},
		"a bad platform":                     {func(g *contract.LeaseGrant) { g.Device.Spec.Platform = "tv" }, "grant.device.spec.platform"},
		"a control char in a variable":       {func(g *contract.LeaseGrant) { g.Environment["X"] = "a\x00b" }, "grant.environment.X"},
		"an oversized model":                 {func(g *contract.LeaseGrant) { g.Device.Spec.Model = strings.Repeat("m", 300) }, "grant.device.spec.model"},
		"a negative event seq":               {func(g *contract.LeaseGrant) { g.EventSeq = -5 }, "grant.eventSeq"},
	} {
		g := good
		g.Environment = map[string]string{"SIMLOCK_DEVICE_ID": "UDID"}
		c.mutate(&g)
		err := checkGrant(g)
		if err == nil || !strings.HasPrefix(err.Error(), c.field) {
			t.Errorf("%s: checkGrant = %v, want an error naming %s", name, err, c.field)
		}
	}
}

// One rule classifies what a forwarded call returned: the worker's own
// refusal as it is; the uplink lost or no answer in time as
// WORKER_UNREACHABLE; anything else as INTERNAL, never as unreachable.
func TestAForwardedCallsFailureIsClassifiedByOneRule(t *testing.T) {
	live := context.Background()
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	for name, c := range map[string]struct {
		ctx     context.Context
		err     error
		code    contract.Code
		refused bool
	}{
		"the worker's refusal":       {live, contract.Errorf(contract.CodeForbidden, "no"), contract.CodeForbidden, true},
		"the uplink lost":            {live, contract.Errorf(contract.CodeDaemonConnectionLost, "gone"), contract.CodeWorkerUnreachable, false},
		"no answer within the bound": {expired, context.Canceled, contract.CodeWorkerUnreachable, false},
		"an answer it cannot decode": {live, errors.New("decode lease.renew result: bad"), contract.CodeInternal, false},
		"a grant that is not valid":  {live, errBadAnswer, contract.CodeInternal, false},
	} {
		ce, refused := forwardError(c.ctx, "w1", "the call", c.err)
		if ce == nil || ce.Code != c.code || refused != c.refused {
			t.Errorf("%s: forwardError = %v, refused %v; want %s, refused %v", name, ce, refused, c.code, c.refused)
		}
	}
}

// owned lists a worker whose id belongs to join token tokenID.
func (f *Fleet) owned(v contract.WorkerView, tokenID string) {
	f.put(v)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.workers[v.ID].owner = tokenID
	f.workers[v.ID].tokenID = tokenID
}

// A join token is one worker's: a second worker id dialing with it is
// FORBIDDEN, and the first keeps its id and its token; a worker id is its
// token's, so another token is refused it too. worker remove frees both.
func TestAJoinTokenJoinsOneWorkerID(t *testing.T) {
	f, _ := newFleet(t, newMemStore())
	f.owned(contract.WorkerView{ID: "w1", Connection: contract.WorkerConnected}, "tok_a")
	var ce *contract.Error
	if err := f.Claim("w2", "tok_a"); !errors.As(err, &ce) || ce.Code != contract.CodeForbidden || !strings.Contains(ce.Message, "w1") {
		t.Errorf("a second worker id with w1's token: %v, want FORBIDDEN naming w1", err)
	}
	if err := f.Claim("w1", "tok_a"); err != nil {
		t.Errorf("w1 again with its own token: %v", err)
	}
	if err := f.Claim("w1", "tok_b"); code(err) != contract.CodeForbidden {
		t.Errorf("w1's id with another token: %v, want FORBIDDEN", err)
	}
	if err := f.Claim("w2", "tok_b"); err != nil {
		t.Errorf("w2 with a token of its own: %v", err)
	}
	f.mu.Lock()
	f.workers["w1"].link = nil
	f.mu.Unlock()
	if _, err := f.Remove(t.Context(), "w1"); err != nil {
		t.Fatal(err)
	}
	if err := f.Claim("w2", "tok_a"); err != nil {
		t.Errorf("w2 with tok_a once w1 was removed: %v", err)
	}
}

// The gateway knows at most MaxWorkers workers: a new id past them is
// refused with a code that says so; the known ones still join.
func TestAGatewayKnowsAtMostMaxWorkers(t *testing.T) {
	f := New(Options{Store: newMemStore(), InstanceID: "ins_gw", MaxWorkers: 2})
	f.owned(contract.WorkerView{ID: "w1", Connection: contract.WorkerDisconnected}, "tok_1")
	f.owned(contract.WorkerView{ID: "w2", Connection: contract.WorkerConnected}, "tok_2")
	var ce *contract.Error
	if err := f.Claim("w3", "tok_3"); !errors.As(err, &ce) || ce.Code != contract.CodeTooManyWorkers || ce.Details["maxWorkers"] != 2 {
		t.Errorf("a third worker past maxWorkers 2: %v, want TOO_MANY_WORKERS with the limit", err)
	}
	if err := f.Claim("w1", "tok_1"); err != nil {
		t.Errorf("a known worker past the cap: %v", err)
	}
}

// A revoked join token's worker keeps its line (its drain and relay
// cursor, for a new token), but what it reported is dropped at once.
func TestARevokedTokensWorkerViewIsDroppedAtOnce(t *testing.T) {
	f, _ := newFleet(t, newMemStore())
	big := contract.WorkerView{ID: "w1", Label: "mac", Connection: contract.WorkerDisconnected, Drained: true,
		Devices: make([]contract.Device, 1000), Leases: make([]contract.LeaseRecord, 1000),
		Catalog: []contract.Catalog{{Platform: contract.PlatformIOS, Models: make([]string, 1000)}}, Capacity: capacity(0, 4)}
	f.owned(big, "tok_a")
	f.CloseToken(t.Context(), "tok_a")
	v, err := f.View("w1")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Devices)+len(v.Leases)+len(v.Catalog) != 0 || v.Capacity != nil {
		t.Errorf("after its token was revoked w1's view keeps %d devices, %d leases, %d catalogs, capacity %v; want them dropped",
			len(v.Devices), len(v.Leases), len(v.Catalog), v.Capacity)
	}
	if !v.Drained || v.Label != "mac" {
		t.Errorf("w1's line = %+v, want its label and drain kept", v)
	}
	if err := f.Claim("w1", "tok_b"); err != nil {
		t.Errorf("w1 with a new token after the old was revoked: %v", err)
	}
}

// Maintain forgets a worker disconnected past its retention within a
// PruneEvery of it, though nothing else happens meanwhile.
func TestAWorkerPastItsRetentionIsForgottenWhileNothingReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		f := New(Options{Store: newMemStore(), InstanceID: "ins_gw", Emit: rec.emit, Retention: 5 * time.Minute})
		f.put(contract.WorkerView{ID: "w1", Connection: contract.WorkerDisconnected, LastSeenAt: time.Now().UnixMilli()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.Maintain(ctx)
		}()
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		if _, err := f.View("w1"); err != nil {
			t.Fatalf("w1 forgotten within its retention: %v", err)
		}
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		if _, err := f.View("w1"); code(err) != contract.CodeUnknownWorker {
			t.Errorf("w1 a minute past its retention: %v, want it forgotten", err)
		}
		if !slices.Equal(rec.names(), []string{"worker.removed"}) || rec.last["reason"] != "retention" {
			t.Errorf("events %v %v, want worker.removed for retention", rec.names(), rec.last)
		}
		cancel()
		<-done
	})
}

// Workers that joined with one shared token before a token was one
// worker's keep joining with it after the gateway restarts; a new id with
// that token is refused.
func TestWorkersThatSharedATokenBeforeKeepItButNoNewIDTakesIt(t *testing.T) {
	st := newMemStore()
	for _, id := range []string{"w1", "w2"} {
		_ = st.Store.PutWorker(context.Background(), store.Worker{ID: id, Label: id, TokenID: "tok_shared"})
	}
	f, _ := newFleet(t, st)
	for _, id := range []string{"w1", "w2"} {
		if err := f.Claim(id, "tok_shared"); err != nil {
			t.Errorf("%s with the token it joined with: %v", id, err)
		}
	}
	if err := f.Claim("w3", "tok_shared"); code(err) != contract.CodeForbidden {
		t.Errorf("a new id with the shared token: %v, want FORBIDDEN", err)
	}
}

// An uplink is authenticated, claimed and upgraded before the fleet
// serves it: a token revoked in between (CloseToken has run, and found no
// link of it to close) must not be served all the same, with a worker id
// bound to it that no new token could take.
func TestAnUplinkWhoseTokenWasRevokedBeforeItAttachedIsNotServed(t *testing.T) {
	f, _ := newFleet(t, newMemStore())
	if err := f.Claim("w1", "tok_a"); err != nil {
		t.Fatal(err)
	}
	f.CloseToken(t.Context(), "tok_a")
	gw, worker := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Attach(t.Context(), Attachment{ID: "w1", TokenID: "tok_a", Conn: gw})
	}()
	buf := make([]byte, 512)
	if n, err := worker.Read(buf); err == nil {
		t.Errorf("the gateway served an uplink whose token was revoked before it attached: it sent %q", buf[:n])
	}
	worker.Close()
	<-done
	if err := f.Claim("w1", "tok_b"); err != nil {
		t.Errorf("w1 with a new token after the old one was revoked: %v", err)
	}
	if err := f.Claim("w1", "tok_a"); code(err) != contract.CodeUnauthenticated {
		t.Errorf("w1 with its revoked token: %v, want UNAUTHENTICATED", err)
	}
}

// A worker's status reads are told to the leasing one at a time, newest
// first: while the leasing is slow to take one (its decisions wait for a
// database another process locks), the reads that follow are not each a
// goroutine holding a snapshot (up to 100,000 leases each), but one
// pending snapshot, the newest, told next; and they are told in the order
// they were read.
func TestAWorkersReadsAreToldOneAtATimeTheNewestNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(Options{Store: newMemStore(), InstanceID: "ins_gw"})
		f.put(contract.WorkerView{ID: "w1", Connection: contract.WorkerConnected})
		release := make(chan struct{})
		var mu sync.Mutex
		var told []uint64
		inside := 0
		most := 0
		f.setChanged(func(_ string, r statusRead, _ bool) {
			mu.Lock()
			told = append(told, r.gen)
			inside++
			most = max(most, inside)
			mu.Unlock()
			<-release
			mu.Lock()
			inside--
			mu.Unlock()
		})
		f.mu.Lock()
		w := f.workers["w1"]
		f.mu.Unlock()
		for gen := uint64(1); gen <= 50; gen++ {
			f.mu.Lock()
			f.notifyLater(w, statusRead{gen: gen})
			f.mu.Unlock()
			if gen == 1 {
				synctest.Wait() // the first is being told, and takes long
			}
		}
		synctest.Wait()
		close(release)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if most != 1 || !slices.Equal(told, []uint64{1, 50}) {
			t.Errorf("50 reads while the leasing was busy were told %v, with %d at once; want the first, then only the newest, one at a time", told, most)
		}
	})
}

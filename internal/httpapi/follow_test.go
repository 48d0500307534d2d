package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/httpapi"
)

// replicaView is a replica's view of who leads, set by the test.
type replicaView struct {
	mu        sync.Mutex
	l         contract.Leadership
	following bool
}

func (v *replicaView) set(l contract.Leadership, following bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.l, v.following = l, following
}

func (v *replicaView) follow() (contract.Leadership, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.l, v.following
}

// seen is one request as the fake leader got it.
type seen struct {
	method, path, query, body          string
	auth, forwardedFor, proto, hopMark string
}

// fakeLeader is an httptest server standing in as the leader: it records
// every request and answers with serve.
func fakeLeader(t *testing.T, serve http.HandlerFunc) (*httptest.Server, <-chan seen) {
	t.Helper()
	got := make(chan seen, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, body: string(body),
			auth: r.Header.Get("Authorization"), forwardedFor: r.Header.Get("X-Forwarded-For"),
			proto: r.Header.Get("X-Forwarded-Proto"), hopMark: r.Header.Get(httpapi.ForwardedHeader)}
		serve(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// newFollower is the API of a replica that follows the leader at
// leaderURL (term 7).
func newFollower(t *testing.T, leaderURL string) (*harness, *replicaView) {
	t.Helper()
	v := &replicaView{}
	v.set(contract.Leadership{Role: contract.RoleFollower, Term: 7, LeaderURL: leaderURL, Self: "http://replica-b.example:7373"}, true)
	return newHarness(t, httpapi.Options{Follow: v.follow}), v
}

// A follower's API is the leader's: a call reaches the leader with its
// method, path, query, body and Authorization intact (the follower checks
// no token: the leader does), marked as forwarded, and the leader's answer
// comes back as it was given; the follower's own backend is asked nothing.
func TestAFollowerForwardsAnAPICallToTheLeaderIntact(t *testing.T) {
	leader, got := fakeLeader(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"from":"leader"}`)
	})
	h, _ := newFollower(t, leader.URL)
	resp := h.do("POST", "/v1/lease-requests?wait=3", "slk_known_to_the_leader_only", `{"platform":"ios"}`)
	m := readJSON(t, resp, http.StatusCreated)
	if m["from"] != "leader" {
		t.Fatalf("answer %v, want the leader's", m)
	}
	s := receive(t, got, "the forwarded request")
	want := seen{method: "POST", path: "/v1/lease-requests", query: "wait=3", body: `{"platform":"ios"}`,
		auth: "Bearer slk_known_to_the_leader_only", forwardedFor: "127.0.0.1", proto: "http", hopMark: "1"}
	if s != want {
		t.Fatalf("the leader got %+v, want %+v", s, want)
	}
	if n := h.fake.callCount(); n != 0 {
		t.Fatalf("the follower's backend was called %d times, want 0", n)
	}
	// The console is the leader's too.
	readJSON(t, h.do("GET", "/console/leases", "", ""), http.StatusCreated)
	if s := receive(t, got, "the console request"); s.path != "/console/leases" {
		t.Fatalf("the leader got %+v, want the console path", s)
	}
}

// A stream through a follower flows event by event: the first event
// arrives while the leader has not yet written the second.
func TestAStreamThroughAFollowerFlowsEventByEvent(t *testing.T) {
	next := make(chan struct{})
	leader, _ := fakeLeader(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := 1; i <= 2; i++ {
			fmt.Fprintf(w, "event: lease-request\nid: %d\ndata: {\"n\":%d}\n\n", i, i)
			http.NewResponseController(w).Flush()
			if i == 1 {
				select {
				case <-next:
				case <-r.Context().Done():
					return
				}
			}
		}
	})
	h, _ := newFollower(t, leader.URL)
	sr := newSSEReader(t, h.do("GET", "/v1/lease-requests/req_1/events", agentSecret, ""))
	if f := sr.mustNext(); f.ID != "1" {
		t.Fatalf("first frame %+v, want event 1 before the leader wrote event 2", f)
	}
	close(next)
	if f := sr.mustNext(); f.ID != "2" {
		t.Fatalf("second frame %+v, want event 2", f)
	}
	sr.expectEnd()
}

// While no leader is known, while the database names this replica itself
// (it won and has not taken over yet), when the leader does not answer,
// and for a request another replica already forwarded, a follower answers
// 503 NOT_LEADER with the leader's URL and the term, so the client tries
// again; it forwards nothing anywhere else.
func TestAFollowerAnswersNotLeaderWhenItCannotForward(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()
	leader, got := fakeLeader(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for _, tc := range []struct {
		name, leaderURL, self, hop string
		wantURL                    string
	}{
		{name: "no leader yet", leaderURL: "", wantURL: ""},
		{name: "the leader is this replica", leaderURL: leader.URL, self: leader.URL, wantURL: leader.URL},
		{name: "the leader does not answer", leaderURL: goneURL, wantURL: goneURL},
		{name: "already forwarded once", leaderURL: leader.URL, hop: "1", wantURL: leader.URL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, v := newFollower(t, tc.leaderURL)
			v.set(contract.Leadership{Role: contract.RoleFollower, Term: 7, LeaderURL: tc.leaderURL, Self: tc.self}, true)
			req := h.request(t.Context(), "GET", "/v1/leases", agentSecret, "")
			if tc.hop != "" {
				req.Header.Set(httpapi.ForwardedHeader, tc.hop)
			}
			resp := h.send(req)
			e := readError(t, resp, contract.CodeNotLeader)
			if e["leaderUrl"] != tc.wantURL || e["term"] != float64(7) {
				t.Fatalf("error %v, want leaderUrl %q and term 7", e, tc.wantURL)
			}
			if ra := resp.Header.Get("Retry-After"); ra == "" {
				t.Fatalf("NOT_LEADER without Retry-After")
			}
			if n := h.fake.callCount(); n != 0 {
				t.Fatalf("the follower's backend was called %d times, want 0", n)
			}
		})
	}
	select {
	case s := <-got:
		t.Fatalf("the leader got %+v, want nothing forwarded", s)
	default:
	}
}

// An uplink to a follower is refused 503 NOT_LEADER with the leader's URL,
// and recorded as any refused uplink is; it never reaches the leader
// through the follower (the worker dials the leader itself).
func TestAFollowerRefusesAnUplinkNamingTheLeader(t *testing.T) {
	leader, got := fakeLeader(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h, _ := newFollower(t, leader.URL)
	e := readError(t, h.do("GET", "/v1/uplink", workerSecret, ""), contract.CodeNotLeader)
	if e["leaderUrl"] != leader.URL || e["term"] != float64(7) {
		t.Fatalf("error %v, want leaderUrl %s and term 7", e, leader.URL)
	}
	h.fake.mu.Lock()
	refused, uplinks := h.fake.refused, len(h.fake.uplinks)
	h.fake.mu.Unlock()
	if len(refused) != 1 || refused[0] != contract.CodeNotLeader || uplinks != 0 {
		t.Fatalf("refusals recorded %v and %d uplinks served, want one NOT_LEADER and none", refused, uplinks)
	}
	select {
	case s := <-got:
		t.Fatalf("the leader got %+v through the follower", s)
	default:
	}
}

// A follower answers its probes, metrics and status itself; once it leads
// it serves every route itself, forwarding nothing.
func TestAFollowerAnswersItsOwnRoutesAndALeaderServesEverything(t *testing.T) {
	leader, got := fakeLeader(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h, v := newFollower(t, leader.URL)
	h.fake.answer(contract.OpStatusGet, contract.Status{Daemon: contract.DaemonInfo{Version: "follower"}}, nil)
	readJSON(t, h.do("GET", "/livez", "", ""), http.StatusOK)
	readJSON(t, h.do("GET", "/readyz", "", ""), http.StatusOK)
	m := readJSON(t, h.do("GET", "/v1/status", agentSecret, ""), http.StatusOK)
	if d, _ := m["daemon"].(map[string]any); d["version"] != "follower" {
		t.Fatalf("status %v, want the follower's own", m)
	}
	v.set(contract.Leadership{Role: contract.RoleLeader, Term: 8, LeaderURL: "http://replica-b.example:7373", Self: "http://replica-b.example:7373"}, false)
	h.fake.answer(contract.OpLeaseList, contract.LeaseListResult{}, nil)
	readJSON(t, h.do("GET", "/v1/leases", agentSecret, ""), http.StatusOK)
	if n := len(h.fake.callsOf(contract.OpLeaseList)); n != 1 {
		t.Fatalf("the leading replica's backend got %d lease.list calls, want 1", n)
	}
	select {
	case s := <-got:
		t.Fatalf("the leader got %+v, want nothing forwarded", s)
	default:
	}
}

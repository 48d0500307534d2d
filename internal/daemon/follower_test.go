package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/uplink"
)

// lockedBuffer is a log sink the test reads while the daemon writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// follower is a gateway made a replica that follows the leader at
// leaderURL (term 3) once it has started, with an agent token made while
// it still served.
type follower struct {
	d          *Daemon
	home       string
	agentToken string
	logs       *lockedBuffer
}

func startFollower(t *testing.T, leaderURL string) follower {
	t.Helper()
	cfg, err := config.Parse([]byte(`{"mode":"gateway","http":{"enabled":true,"port":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	d, home := startDaemonOpts(t, Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	admin := dial(t, home, "ops", true)
	if _, err := admin.StatusWith(context.Background(), contract.StatusGetInput{WaitReady: true}); err != nil {
		t.Fatal(err)
	}
	var tok contract.TokenCreateResult
	if err := admin.Call(context.Background(), contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenAgent}, &tok); err != nil {
		t.Fatal(err)
	}
	// Set before the test's next request is written, which orders it
	// before the daemon reads it.
	d.replica.on = true
	d.replica.see(contract.Leadership{Role: contract.RoleFollower, Term: 3, LeaderURL: leaderURL, Since: 1000, Self: "http://replica-b.example:7373"})
	return follower{d: d, home: home, agentToken: tok.Secret, logs: logs}
}

func httpDo(t *testing.T, method, url, secret, body string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// notLeaderOf checks that err (or an HTTP error body) is NOT_LEADER naming
// leaderURL and term 3.
func checkNotLeader(t *testing.T, what string, e *contract.Error, leaderURL string) {
	t.Helper()
	if e == nil || e.Code != contract.CodeNotLeader {
		t.Fatalf("%s: %v, want NOT_LEADER", what, e)
	}
	if e.Details["leaderUrl"] != leaderURL || e.Details["term"] != float64(3) && e.Details["term"] != int64(3) {
		t.Fatalf("%s: details %v, want leaderUrl %q and term 3", what, e.Details, leaderURL)
	}
}

// Over HTTP a follower is its leader's: an API call reaches the leader with
// its method, path, body and Authorization (a token the follower does not
// know), the uplink is refused NOT_LEADER naming the leader and logged,
// and the follower's own status says whom it follows.
func TestAFollowersHTTPAPIIsItsLeaders(t *testing.T) {
	type seen struct{ method, path, body, auth string }
	got := make(chan seen, 4)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, string(b), r.Header.Get("Authorization")}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"requestId":"req_from_leader"}`)
	}))
	defer leader.Close()
	f := startFollower(t, leader.URL)
	base := f.d.httpURL

	status, _, body := httpDo(t, "POST", base+"/v1/lease-requests", "slk_only_the_leader_knows", `{"platform":"android"}`)
	if status != http.StatusAccepted || !strings.Contains(string(body), "req_from_leader") {
		t.Fatalf("POST /v1/lease-requests = %d %s, want the leader's 202", status, body)
	}
	select {
	case s := <-got:
		if want := (seen{"POST", "/v1/lease-requests", `{"platform":"android"}`, "Bearer slk_only_the_leader_knows"}); s != want {
			t.Fatalf("the leader got %+v, want %+v", s, want)
		}
	default:
		t.Fatal("the leader got nothing")
	}

	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/v1/uplink", nil)
	req.Header.Set("Authorization", "Bearer slk_some_worker")
	req.Header.Set(uplink.HeaderWorkerID, "w-7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var eb struct{ Error *contract.Error }
	err = json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("uplink: %d %v, want 503", resp.StatusCode, err)
	}
	checkNotLeader(t, "uplink", eb.Error, leader.URL)
	if logs := f.logs.String(); !strings.Contains(logs, "uplink refused: this replica does not lead") || !strings.Contains(logs, "workerId=w-7") {
		t.Fatalf("the refused uplink is not in the log:\n%s", logs)
	}

	status, _, body = httpDo(t, "GET", base+"/v1/status", f.agentToken, "")
	var st contract.Status
	if err := json.Unmarshal(body, &st); err != nil || status != http.StatusOK {
		t.Fatalf("GET /v1/status = %d %s", status, body)
	}
	if l := st.Leadership; l == nil || l.Role != contract.RoleFollower || l.LeaderURL != leader.URL || l.Term != 3 {
		t.Fatalf("status leadership %+v, want following %s in term 3", st.Leadership, leader.URL)
	}
	select {
	case s := <-got:
		t.Fatalf("the leader got %+v, want the follower to answer its status itself", s)
	default:
	}
}

// On the socket a follower answers NOT_LEADER, naming the leader, to what
// needs the gateway's parts, and answers its status (daemon, host and
// leadership, nothing of the fleet), config and metrics itself; once it
// leads it serves everything.
func TestAFollowersSocketAnswersNotLeaderButForItsOwnState(t *testing.T) {
	f := startFollower(t, "http://replica-a.example:7373")
	ctx := context.Background()
	admin := dial(t, f.home, "ops", true)
	agent := dial(t, f.home, "agent", false)

	_, err := agent.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	checkNotLeader(t, "lease.request", contract.AsError(err), "http://replica-a.example:7373")
	for _, op := range []contract.Op{contract.OpWorkerList, contract.OpLeaseList, contract.OpTokenList, contract.OpJobList} {
		err := admin.Call(ctx, op, contract.Empty{}, &json.RawMessage{})
		checkNotLeader(t, string(op), contract.AsError(err), "http://replica-a.example:7373")
	}

	st, err := admin.StatusWith(ctx, contract.StatusGetInput{})
	if err != nil {
		t.Fatal(err)
	}
	want := contract.Leadership{Role: contract.RoleFollower, Term: 3, LeaderURL: "http://replica-a.example:7373", Since: 1000, Self: "http://replica-b.example:7373"}
	if st.Leadership == nil || *st.Leadership != want {
		t.Fatalf("status leadership %+v, want %+v", st.Leadership, want)
	}
	if st.Daemon.Mode != contract.ModeGateway || st.Host.CPUs == 0 || st.Fleet != nil || st.Capacity != nil || st.Leases != nil {
		t.Fatalf("a follower's status = %+v, want its daemon and host and nothing of the fleet", st)
	}
	var cfg map[string]any
	if err := admin.Call(ctx, contract.OpConfigGet, contract.ConfigGetInput{Key: "mode"}, &cfg); err != nil {
		t.Fatalf("config.get on a follower: %v", err)
	}
	var m contract.MetricsResult
	if err := admin.Call(ctx, contract.OpMetricsGet, contract.Empty{}, &m); err != nil {
		t.Fatalf("metrics.get on a follower: %v", err)
	}

	f.d.replica.see(contract.Leadership{Role: contract.RoleLeader, Term: 4, LeaderURL: "http://replica-b.example:7373", Since: 2000, Self: "http://replica-b.example:7373"})
	f.d.replica.leading.Store(true)
	var leases json.RawMessage
	if err := admin.Call(ctx, contract.OpLeaseList, contract.Empty{}, &leases); err != nil {
		t.Fatalf("lease.list on the leader: %v", err)
	}
	st, err = admin.StatusWith(ctx, contract.StatusGetInput{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Leadership == nil || st.Leadership.Role != contract.RoleLeader || st.Leadership.Term != 4 || st.Fleet == nil {
		t.Fatalf("the leader's status = leadership %+v fleet %v, want leading in term 4 with its fleet", st.Leadership, st.Fleet)
	}
}

// /readyz on a follower fails its leader check, saying whom it follows or
// that none leads; /livez passes; once it leads, /readyz passes.
func TestReadinessSendsWorkToTheLeaderOnly(t *testing.T) {
	f := startFollower(t, "http://replica-a.example:7373")
	base := f.d.httpURL
	leaderCheck := func(wantStatus int) contract.HealthCheck {
		t.Helper()
		status, _, body := httpDo(t, "GET", base+"/readyz?verbose", "", "")
		var rep contract.HealthReport
		if err := json.Unmarshal(body, &rep); err != nil || status != wantStatus {
			t.Fatalf("/readyz = %d %s, want %d", status, body, wantStatus)
		}
		for _, c := range rep.Checks {
			if c.Name == contract.HealthLeader {
				return c
			}
		}
		t.Fatalf("/readyz has no leader check: %s", body)
		return contract.HealthCheck{}
	}
	if c := leaderCheck(http.StatusServiceUnavailable); c.OK || c.Detail != "following http://replica-a.example:7373 (term 3)" {
		t.Fatalf("leader check %+v, want not ok, following replica-a in term 3", c)
	}
	if status, _, body := httpDo(t, "GET", base+"/livez", "", ""); status != http.StatusOK {
		t.Fatalf("/livez on a follower = %d %s, want 200", status, body)
	}
	f.d.replica.see(contract.Leadership{Role: contract.RoleFollower, Term: 3, Self: "http://replica-b.example:7373"})
	if c := leaderCheck(http.StatusServiceUnavailable); c.OK || c.Detail != "no leader yet" {
		t.Fatalf("leader check %+v, want not ok, no leader yet", c)
	}
	f.d.replica.see(contract.Leadership{Role: contract.RoleLeader, Term: 4, LeaderURL: "http://replica-b.example:7373", Self: "http://replica-b.example:7373"})
	f.d.replica.leading.Store(true)
	if c := leaderCheck(http.StatusOK); !c.OK || c.Detail != "" {
		t.Fatalf("leader check %+v on the leader, want ok", c)
	}
}

// A daemon that is not a replica has no leader check and no leadership.
func TestADaemonThatIsNotAReplicaHasNoLeaderCheck(t *testing.T) {
	d, _ := startDaemon(t, nil)
	for _, c := range d.Health(context.Background(), false) {
		if c.Name == contract.HealthLeader {
			t.Fatalf("a worker's readiness has a leader check: %+v", c)
		}
	}
	var s contract.Status
	if d.replicaStatus(&s) || s.Leadership != nil {
		t.Fatalf("a worker's status has leadership %+v", s.Leadership)
	}
}

// A gateway on PostgreSQL gates as a replica from its start, before its
// store opens: a call with a token while the database cannot be reached
// is answered NOT_LEADER (no replica leads that it knows of), for the
// client to try elsewhere, never UNAUTHENTICATED for a token it could not
// check.
func TestAReplicaWhoseDatabaseIsDownAnswersNotLeaderNotUnauthenticated(t *testing.T) {
	dead := "postgres://simlock@127.0.0.1:1/none?sslmode=disable&connect_timeout=1"
	cfg, err := config.Parse([]byte(`{"mode":"gateway","http":{"enabled":true,"host":"127.0.0.1","port":0},"gateway":{"store":"` + dead + `"}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := startDaemonOpts(t, Options{Config: cfg})
	if !d.replica.enabled() {
		t.Fatal("a gateway on PostgreSQL is not a replica as it starts")
	}
	status, _, body := httpDo(t, "GET", d.HTTPURL()+"/v1/leases", "slk_some_agent_token", "")
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), string(contract.CodeNotLeader)) {
		t.Fatalf("a call while the replica's database is down: %d %s; want 503 NOT_LEADER", status, body)
	}
}

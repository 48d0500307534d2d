package uplink

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

func TestSameGatewayComparesSchemeHostAndPort(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"https://gw-1.example:7430", "https://gw-1.example:7430/", true},
		{"https://GW-1.example:7430", "https://gw-1.example:7430", true},
		{"https://gw-1.example", "https://gw-1.example:443", true},
		{"http://gw-1.example", "http://gw-1.example:80/", true},
		{"http://gw-1.example:7430", "https://gw-1.example:7430", false},
		{"https://gw-1.example:7430", "https://gw-1.example:7431", false},
		{"https://gw-1.example:7430", "https://gw-2.example:7430", false},
		{"https://gw-1.example", "https://gw-1.example:80", false},
		{"https://gw-1.example:7430", "", false},
		{"", "", false},
		{"gw-1.example:7430", "gw-1.example:7430", false},
	} {
		if got := SameGateway(tc.a, tc.b); got != tc.same {
			t.Errorf("SameGateway(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

// replicas are stand-ins for a gateway's replicas: followers that refuse
// an uplink NOT_LEADER naming a leader, and a leader that accepts it. Each
// counts the uplinks it was asked for.
type replicas struct {
	t     *testing.T
	mu    sync.Mutex
	asked map[string]int // by URL
}

func newReplicas(t *testing.T) *replicas { return &replicas{t: t, asked: map[string]int{}} }

func (rs *replicas) count(u string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.asked[u]++
}

func (rs *replicas) askedOf(u string) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.asked[u]
}

// follower refuses every uplink NOT_LEADER with leader() as its hint, the
// way the HTTP API writes its errors.
func (rs *replicas) follower(leader func() string) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.count(srv.URL)
		e := contract.Errorf(contract.CodeNotLeader, "this gateway replica does not lead").With("leaderUrl", leader()).With("term", 7)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"error": e})
	}))
	rs.t.Cleanup(srv.Close)
	return srv
}

// leader accepts every uplink; the gateway's end is closed with the test.
func (rs *replicas) leader() *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.count(srv.URL)
		c, err := Accept(w, r, Options{})
		if err != nil {
			rs.t.Errorf("accept: %v", err)
			return
		}
		rs.t.Cleanup(func() { c.Close(); <-c.Done() })
	}))
	rs.t.Cleanup(srv.Close)
	return srv
}

// deadURL is an address nothing listens on.
func deadURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}

func dialWorker(ctx context.Context, u string) (*Conn, error) {
	return Dial(ctx, u, "token", "worker-1", "Worker 1", Options{})
}

// dialFirst is one round over urls; it returns the URL connected to and
// the leaders named outside urls.
func dialFirst(t *testing.T, urls []string) (string, []string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	var foreign []string
	c, at, err := DialFirst(ctx, urls, waitLong, dialWorker, func(u string) { foreign = append(foreign, u) })
	if c != nil {
		t.Cleanup(func() { closeAndWait(t, c) })
	}
	return at, foreign, err
}

// A follower's hint to a replica in the list is dialled next, ahead of the
// URLs listed before it.
func TestDialFirstFollowsTheLeaderAFollowerNamesWhenItIsListed(t *testing.T) {
	rs := newReplicas(t)
	lead := rs.leader()
	a := rs.follower(func() string { return lead.URL + "/" })
	b := rs.follower(func() string { return lead.URL })
	at, foreign, err := dialFirst(t, []string{a.URL, b.URL, lead.URL})
	if err != nil {
		t.Fatalf("round: %v, want it joined to the leader", err)
	}
	if at != lead.URL {
		t.Errorf("joined %s, want the leader %s", at, lead.URL)
	}
	if n := rs.askedOf(b.URL); n != 0 {
		t.Errorf("the second follower was asked %d times, want 0: the first one's hint goes to the leader at once", n)
	}
	if len(foreign) != 0 {
		t.Errorf("leaders named outside the list: %v, want none", foreign)
	}
}

// A hint to a URL the worker's config does not list is not followed: the
// join token goes only where the config says.
func TestDialFirstDoesNotFollowAHintOutsideItsList(t *testing.T) {
	rs := newReplicas(t)
	stranger := rs.leader()
	a := rs.follower(func() string { return stranger.URL })
	b := rs.leader()
	at, foreign, err := dialFirst(t, []string{a.URL, b.URL})
	if err != nil {
		t.Fatalf("round: %v, want it joined to the second URL", err)
	}
	if at != b.URL {
		t.Errorf("joined %s, want the next listed URL %s", at, b.URL)
	}
	if n := rs.askedOf(stranger.URL); n != 0 {
		t.Errorf("the unlisted leader was dialled %d times, want 0", n)
	}
	if !slices.Equal(foreign, []string{stranger.URL}) {
		t.Errorf("unlisted leaders told = %v, want [%s]", foreign, stranger.URL)
	}
}

func TestDialFirstGoesOnPastADeadURL(t *testing.T) {
	rs := newReplicas(t)
	live := rs.leader()
	at, _, err := dialFirst(t, []string{deadURL(t), live.URL})
	if err != nil || at != live.URL {
		t.Fatalf("round = %q, %v; want joined to %s", at, err, live.URL)
	}
}

// Followers that name each other (a leader that has just gone) are each
// asked once a round; the round fails with their refusals.
func TestDialFirstAsksEachReplicaOnceARound(t *testing.T) {
	rs := newReplicas(t)
	var a, b *httptest.Server
	a = rs.follower(func() string { return b.URL })
	b = rs.follower(func() string { return a.URL })
	dead := deadURL(t)
	at, _, err := dialFirst(t, []string{a.URL, b.URL, dead})
	if err == nil {
		t.Fatalf("round joined %s, want it failed", at)
	}
	for _, u := range []string{a.URL, b.URL} {
		if n := rs.askedOf(u); n != 1 {
			t.Errorf("%s was asked %d times in the round, want 1", u, n)
		}
	}
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != contract.CodeNotLeader || re.Status != http.StatusServiceUnavailable {
		t.Errorf("round error %v, want the NOT_LEADER refusals in it", err)
	}
	if !strings.Contains(err.Error(), strings.TrimPrefix(dead, "http://")) {
		t.Errorf("round error %q, want it to name the dead URL too", err)
	}
}

func TestRefusedErrorLeaderURLIsOnlyANotLeadersHint(t *testing.T) {
	for _, tc := range []struct {
		e    RefusedError
		want string
	}{
		{RefusedError{Code: contract.CodeNotLeader, Details: map[string]any{"leaderUrl": "https://gw-2:7430", "term": 3.0}}, "https://gw-2:7430"},
		{RefusedError{Code: contract.CodeNotLeader, Details: map[string]any{"leaderUrl": ""}}, ""},
		{RefusedError{Code: contract.CodeNotLeader}, ""},
		{RefusedError{Code: contract.CodeNotLeader, Details: map[string]any{"leaderUrl": 3.0}}, ""},
		{RefusedError{Code: contract.CodeUnauthenticated, Details: map[string]any{"leaderUrl": "https://gw-2:7430"}}, ""},
	} {
		if got := tc.e.LeaderURL(); got != tc.want {
			t.Errorf("%+v: LeaderURL %q, want %q", tc.e, got, tc.want)
		}
	}
}

// A worker whose replicas all refuse it waits longer after each round,
// never less than half the first step: no tight loop.
func TestRedialBacksOffWhileEveryReplicaRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		urls := []string{"https://gw-1.example:7430", "https://gw-2.example:7430"}
		refuse := func(_ context.Context, u string) (*Conn, error) {
			other := urls[0]
			if u == other {
				other = urls[1]
			}
			return nil, &RefusedError{Status: http.StatusServiceUnavailable, Code: contract.CodeNotLeader, Details: map[string]any{"leaderUrl": other}}
		}
		var rounds []time.Time
		dials := 0
		b := Backoff{QuickTries: 2}
		Redial(ctx, &b, func() (time.Duration, error) {
			rounds = append(rounds, time.Now())
			if len(rounds) == 6 {
				cancel()
				return 0, nil
			}
			_, _, err := DialFirst(ctx, urls, time.Second, func(ctx context.Context, u string) (*Conn, error) { dials++; return refuse(ctx, u) }, nil)
			return 0, err
		}, nil)
		if dials != 2*5 {
			t.Errorf("%d dials in 5 rounds over 2 replicas, want 10", dials)
		}
		// Steps of 500 ms, 1 s, then (past the 2 quick tries) 2 s, 4 s, 8 s:
		// each wait is at least half its step.
		for i, floor := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second} {
			if gap := rounds[i+1].Sub(rounds[i]); gap < floor {
				t.Errorf("wait before round %d was %v, want at least %v", i+2, gap, floor)
			}
		}
	})
}

// A replica that does not answer at all (its machine gone or frozen)
// holds the round for DialStagger, not for its dial's bound: the next URL
// is dialled beside it, and the silent dial is cancelled once the round
// joined.
func TestDialFirstDialsTheNextBesideASilentReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex // the dials of a round run at once
		var tried []string
		silentEnded := make(chan error, 1)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, at, err := DialFirst(ctx, []string{"https://gone.example:7430", "https://gw-2.example:7430"}, 10*time.Second,
			func(ctx context.Context, u string) (*Conn, error) {
				mu.Lock()
				tried = append(tried, u)
				mu.Unlock()
				if u == "https://gone.example:7430" {
					<-ctx.Done()
					silentEnded <- ctx.Err()
					return nil, ctx.Err()
				}
				return nil, nil
			}, nil)
		if err != nil || at != "https://gw-2.example:7430" {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("round = %q, %v (tried %q); want it joined to the second replica", at, err, tried)
		}
		if waited := time.Since(start); waited != DialStagger {
			t.Errorf("the silent replica held the round %v, want DialStagger, %v", waited, DialStagger)
		}
		if err := <-silentEnded; !errors.Is(err, context.Canceled) {
			t.Errorf("the silent dial ended with %v, want it cancelled once the round joined", err)
		}
	})
}

// An uplink a dial makes after another dial of the round won is closed,
// not left open beside the one the worker serves.
func TestDialFirstClosesAnUplinkMadeAfterTheRoundJoined(t *testing.T) {
	slow, fast := pair(t, Options{})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		c, at, err := DialFirst(ctx, []string{"https://slow.example:7430", "https://fast.example:7430"}, 10*time.Second,
			func(ctx context.Context, u string) (*Conn, error) {
				if u == "https://slow.example:7430" {
					<-ctx.Done()
					return slow, nil // made all the same, as the cancel came
				}
				return fast, nil
			}, nil)
		if err != nil || at != "https://fast.example:7430" || c != fast {
			t.Fatalf("round = %q, %v; want it joined to the fast replica", at, err)
		}
		synctest.Wait()
	})
	select {
	case <-slow.Done():
	case <-time.After(waitLong):
		t.Fatal("the uplink the slow dial made after the round joined is still open")
	}
}

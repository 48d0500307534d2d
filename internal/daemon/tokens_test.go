package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/config"

	"github.com/simlock/simlock/internal/contract"
)

func TestTokensAreAdminOnlyHashedAndRevocable(t *testing.T) {
	d, home := startDaemon(t, nil)
	ctx := context.Background()
	agent := dial(t, home, "a", false)
	var made contract.TokenCreateResult
	if err := agent.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenAgent}, &made); code(err) != contract.CodeForbidden {
		t.Fatalf("agent token.create: %v, want FORBIDDEN", err)
	}
	admin := dial(t, home, "op", true)
	if err := admin.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: "root"}, &made); code(err) != contract.CodeBadRequest {
		t.Fatalf("role root: %v, want BAD_REQUEST", err)
	}
	if err := admin.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenAgent, Label: "ci"}, &made); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(made.Secret, "slk_") || !strings.HasPrefix(made.Token.ID, "tok_") || made.Token.Label != "ci" {
		t.Fatalf("made %+v", made)
	}
	back := httpBackend{d}
	tok, authErr := back.Authenticate(ctx, made.Secret)
	ok := authErr == nil
	if !ok || tok.ID != made.Token.ID || tok.SessionRole() != contract.RoleAgent {
		t.Fatalf("authenticate the new secret = %+v, %v", tok, ok)
	}
	if _, err := back.Authenticate(ctx, made.Secret+"x"); err == nil {
		t.Fatal("a wrong secret authenticated")
	}
	// The secret itself is kept nowhere: only its hash.
	stored, err := d.db.Tokens(ctx)
	if err != nil || len(stored) != 1 || stored[0].Hash == made.Secret || strings.Contains(stored[0].Hash, made.Secret) {
		t.Fatalf("stored tokens = %+v, %v", stored, err)
	}
	var list contract.TokenListResult
	if err := admin.Call(ctx, contract.OpTokenList, contract.Empty{}, &list); err != nil || len(list.Tokens) != 1 || list.Tokens[0] != made.Token {
		t.Fatalf("list = %+v, %v", list, err)
	}
	var rev contract.TokenRevokeResult
	if err := admin.Call(ctx, contract.OpTokenRevoke, contract.TokenRevokeInput{ID: made.Token.ID}, &rev); err != nil || !rev.Revoked {
		t.Fatalf("revoke = %+v, %v", rev, err)
	}
	if _, err := back.Authenticate(ctx, made.Secret); err == nil {
		t.Fatal("a revoked secret still authenticates")
	}
	if err := admin.Call(ctx, contract.OpTokenRevoke, contract.TokenRevokeInput{ID: made.Token.ID}, &rev); err != nil || rev.Revoked {
		t.Fatalf("second revoke = %+v, %v; want revoked false", rev, err)
	}
}

func TestHTTPSessionsShareTheDispatcherRules(t *testing.T) {
	d, _ := startDaemon(t, nil)
	ctx := context.Background()
	back := httpBackend{d}
	agent := contract.TokenRecord{ID: "tok_agent", Role: contract.TokenAgent}
	if _, err := back.Call(ctx, agent, contract.OpListGet, contract.ListGetInput{}, nil); code(err) != contract.CodeForbidden {
		t.Errorf("agent list.get over HTTP: %v, want FORBIDDEN", err)
	}
	if _, err := back.Call(ctx, agent, contract.OpLeaseRequestCreate, map[string]any{"platform": "ios", "colour": "red"}, nil); code(err) != contract.CodeBadRequest {
		t.Errorf("unknown field over HTTP: %v, want BAD_REQUEST", err)
	}
	res, err := back.Call(ctx, agent, contract.OpLeaseRequestCreate, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := res.(contract.LeaseRequestStatus)
	if st.Request.RequesterID != "tok_agent" || st.Request.OwnerID != "tok_agent" {
		t.Errorf("request made over HTTP belongs to %s/%s, want the token id", st.Request.RequesterID, st.Request.OwnerID)
	}
	other := contract.TokenRecord{ID: "tok_other", Role: contract.TokenAgent}
	if _, err := back.Call(ctx, other, contract.OpLeaseRequestGet, contract.LeaseRequestGetInput{RequestID: st.Request.ID}, nil); code(err) != contract.CodeUnknownLeaseRequest {
		t.Errorf("another agent reads the request: %v, want UNKNOWN_LEASE_REQUEST", err)
	}
}

func TestDoctorReportsAWarmPoolTargetThatCanNeverBeFilled(t *testing.T) {
	cfg, err := config.Default().Override("warmPool.targets", `[{"platform":"ios","model":"No Such Phone","count":1}]`)
	if err != nil {
		t.Fatal(err)
	}
	_, home := startDaemon(t, cfg)
	ctx := context.Background()
	evs, _, err := dial(t, home, "op", true).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The pool's first pass finds the model unknown and says so.
	timeout := time.After(20 * time.Second)
	for missed := false; !missed; {
		select {
		case ev := <-evs:
			missed = ev.Event == "warm-pool.target-missed" && strings.Contains(string(ev.Payload), "unknown-model")
		case <-timeout:
			t.Fatal("no warm-pool.target-missed event")
		}
	}
	var res contract.DoctorResult
	if err := dial(t, home, "a", false).Call(ctx, contract.OpDoctorRun, contract.DoctorInput{}, &res); err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Findings {
		if f.Kind == "warm-pool-target-unreachable" && f.Reason == "unknown-model" {
			return
		}
	}
	t.Errorf("findings = %+v, want warm-pool-target-unreachable", res.Findings)
}

// Creating and revoking a token are events naming the token and who acted,
// never its secret; revoking a token ends the HTTP streams it holds open
// at once, the last event of each saying why. On a worker and a gateway.
func TestTokenEventsAndRevocationEndsItsStreams(t *testing.T) {
	for mode, raw := range map[string]string{
		"worker":  `{"http":{"enabled":true,"port":0}}`,
		"gateway": `{"mode":"gateway","http":{"enabled":true,"port":0}}`,
	} {
		t.Run(mode, func(t *testing.T) {
			cfg, err := config.Parse([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			d, home := startDaemon(t, cfg)
			tokenEventsAndRevocation(t, d, home)
		})
	}
}

func tokenEventsAndRevocation(t *testing.T, d *Daemon, home string) {
	ctx := context.Background()
	admin := dial(t, home, "op-alice", true)
	var made contract.TokenCreateResult
	if err := admin.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenOperator, Label: "dash"}, &made); err != nil {
		t.Fatal(err)
	}

	req, err := http.NewRequestWithContext(ctx, "GET", d.HTTPURL()+"/v1/events/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+made.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != ": connected\n" {
		t.Fatalf("stream start %q, %v", line, err)
	}

	var rev contract.TokenRevokeResult
	if err := admin.Call(ctx, contract.OpTokenRevoke, contract.TokenRevokeInput{ID: made.Token.ID}, &rev); err != nil || !rev.Revoked {
		t.Fatalf("revoke = %+v, %v", rev, err)
	}
	rest := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(br)
		rest <- string(b)
	}()
	select {
	case text := <-rest:
		// Events committed before the revocation may come first; the
		// stream's last frame says why it ended.
		frames := strings.Split(strings.TrimSpace(text), "\n\n")
		if last := frames[len(frames)-1]; !strings.HasPrefix(last, "event: error\n") || !strings.Contains(last, `"UNAUTHENTICATED"`) {
			t.Errorf("the stream of a revoked token ended with %q, want an error event with UNAUTHENTICATED", last)
		}
	case <-time.After(time.Second):
		t.Fatal("the event stream of a revoked token was still open a second after the revocation")
	}

	var evs contract.EventsReplayResult
	if err := admin.Call(ctx, contract.OpEventsReplay, contract.EventsReplayInput{SinceTs: 1}, &evs); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"token.created": false, "token.revoked": false}
	for _, ev := range evs.Events {
		if _, ok := want[ev.Event]; !ok {
			continue
		}
		want[ev.Event] = true
		if strings.Contains(string(ev.Payload), made.Secret) || strings.Contains(string(ev.Payload), hashSecret(made.Secret)) {
			t.Errorf("%s carries the secret or its hash: %s", ev.Event, ev.Payload)
		}
		var p map[string]any
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p["tokenId"] != made.Token.ID || p["role"] != "operator" || p["label"] != "dash" || p["by"] != "op-alice" {
			t.Errorf("%s payload %v, want the token's id, role and label and who acted", ev.Event, p)
		}
	}
	for name, seen := range want {
		if !seen {
			t.Errorf("no %s event in the log", name)
		}
	}
}

// A revocation that cannot be saved (another process holds the database)
// fails with INTERNAL and changes nothing: the token still opens what it
// opened and is still listed, as it would be again after a restart, rather
// than refused until one. Made again once the lock is gone, it revokes.
func TestARevocationThatCannotBeSavedChangesNothing(t *testing.T) {
	d, home := startDaemonOpts(t, Options{StoreBusyTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	admin := dial(t, home, "op", true)
	var made contract.TokenCreateResult
	if err := admin.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenAgent, Label: "ci"}, &made); err != nil {
		t.Fatal(err)
	}
	back := httpBackend{d}

	release := outsideLock(t, filepath.Join(home, DBName))
	var rev contract.TokenRevokeResult
	if err := admin.Call(ctx, contract.OpTokenRevoke, contract.TokenRevokeInput{ID: made.Token.ID}, &rev); code(err) != contract.CodeInternal {
		t.Fatalf("revoke while another process holds the database: %+v, %v; want INTERNAL", rev, err)
	}
	if _, err := back.Authenticate(ctx, made.Secret); err != nil {
		t.Error("a revocation that failed left the token refused: it is still stored, and opens everything again after a restart")
	}
	var list contract.TokenListResult
	if err := admin.Call(ctx, contract.OpTokenList, contract.Empty{}, &list); err != nil || len(list.Tokens) != 1 {
		t.Errorf("tokens listed after a revocation that failed: %+v, %v; want the token still there", list.Tokens, err)
	}
	release()

	if err := admin.Call(ctx, contract.OpTokenRevoke, contract.TokenRevokeInput{ID: made.Token.ID}, &rev); err != nil || !rev.Revoked {
		t.Fatalf("revoke once the lock is given back: %+v, %v", rev, err)
	}
	if _, err := back.Authenticate(ctx, made.Secret); err == nil {
		t.Error("a revoked secret still authenticates")
	}
}

// A daemon whose store could not be opened has no tokens to check a
// secret against: it says so (DAEMON_STARTUP_FAILED, a 503), rather than
// call a valid token unknown (UNAUTHENTICATED, a 401 a client would not
// try again).
func TestATokenIsNotCalledUnknownWhenTheStoreCouldNotOpen(t *testing.T) {
	d := &Daemon{storeReady: make(chan struct{})}
	close(d.storeReady) // opened, or failed to: here failed, no token book
	_, err := httpBackend{d}.Authenticate(context.Background(), "slk_whatever")
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != contract.CodeDaemonStartupFailed {
		t.Fatalf("Authenticate with no token book = %v, want DAEMON_STARTUP_FAILED", err)
	}
}

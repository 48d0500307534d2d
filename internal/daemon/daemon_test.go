package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/driver"
)

// startDaemon runs a daemon in-process on a short temporary home with demo
// drivers whose operations take no time.
func startDaemon(tb testing.TB, cfg *config.Config) (*Daemon, string) {
	tb.Helper()
	return startDaemonWith(tb, cfg, demoDrivers(tb))
}

func startDaemonWith(tb testing.TB, cfg *config.Config, drivers map[contract.Platform]driver.Driver) (*Daemon, string) {
	tb.Helper()
	return startDaemonOpts(tb, Options{Config: cfg, Drivers: drivers})
}

// startDaemonOpts starts a daemon in a new home with opts, the test's
// version and host filled in.
func startDaemonOpts(tb testing.TB, opts Options) (*Daemon, string) {
	tb.Helper()
	cfg, drivers := opts.Config, opts.Drivers
	home, err := os.MkdirTemp("", "sld")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(home) })
	if cfg == nil {
		cfg = config.Default()
	}
	opts.Home, opts.Version, opts.Config, opts.Drivers, opts.Host = home, "test", cfg, drivers, core.Host{CPUs: 8, RAMBytes: 64 << 30}
	d, err := Start(context.Background(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Stop("test over") })
	return d, home
}

func dial(tb testing.TB, home, principal string, admin bool) *client.Client {
	tb.Helper()
	hello := contract.HelloInput{Principal: principal}
	if admin {
		b, err := os.ReadFile(filepath.Join(home, AdminTokenName))
		if err != nil {
			tb.Fatal(err)
		}
		hello.AdminToken = strings.TrimSpace(string(b))
	}
	c, err := client.Dial(context.Background(), SocketPath(home), hello)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

func code(err error) contract.Code {
	var ce *contract.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

func TestHelloNegotiatesVersionAndRole(t *testing.T) {
	_, home := startDaemon(t, nil)
	_, err := client.Dial(context.Background(), SocketPath(home), contract.HelloInput{Protocol: contract.VersionRange{Min: 50, Max: 60}})
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != contract.CodeProtocolVersionUnsupported {
		t.Fatalf("err = %v", err)
	}
	if _, ok := ce.Details["client"]; !ok {
		t.Errorf("details %v do not name the client range", ce.Details)
	}
	if _, ok := ce.Details["daemon"]; !ok {
		t.Errorf("details %v do not name the daemon range", ce.Details)
	}
	_, err = client.Dial(context.Background(), SocketPath(home), contract.HelloInput{AdminToken: "guess"})
	if code(err) != contract.CodeAdminAuthenticationFailed {
		t.Errorf("wrong admin token: %v", err)
	}
	agent := dial(t, home, "a", false)
	if agent.Hello().Role != contract.RoleAgent {
		t.Errorf("role = %s", agent.Hello().Role)
	}
	if _, err := agent.List(context.Background(), contract.ListDevices); code(err) != contract.CodeForbidden {
		t.Errorf("agent list.get: %v", err)
	}
	admin := dial(t, home, "ops", true)
	if _, err := admin.List(context.Background(), contract.ListDevices); err != nil {
		t.Errorf("admin list.get: %v", err)
	}
	st, err := os.Stat(filepath.Join(home, AdminTokenName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("admin.token mode %v, %v", st.Mode().Perm(), err)
	}
}

func TestBadFramesGetErrorsAndTheSessionGoesOn(t *testing.T) {
	_, home := startDaemon(t, nil)
	conn, err := net.Dial("unix", SocketPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReaderSize(conn, 1<<20)
	send := func(s string) contract.Response {
		t.Helper()
		if _, err := conn.Write([]byte(s + "\n")); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(line) {
			t.Fatalf("the answer to %q is not valid UTF-8, so not JSON: %q", s, line)
		}
		var resp contract.Response
		if err := json.Unmarshal(line, &resp); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return resp
	}
	want := func(resp contract.Response, c contract.Code) {
		t.Helper()
		if resp.Error == nil || resp.Error.Code != c {
			t.Errorf("got %+v, want %s", resp, c)
		}
	}
	want(send(`this is not json`), contract.CodeBadFrame)
	want(send(`{"id":"1","op":"status.get"}`), contract.CodeHandshakeRequired)
	want(send(strings.Repeat("x", contract.MaxFrameLen+10)), contract.CodeBadFrame)
	want(send(`{"id":"2","op":"hello","input":{"protocol":{"min":1,"max":1}},"extra":true}`), contract.CodeBadFrame)
	if resp := send(`{"id":"3","op":"hello","input":{"protocol":{"min":1,"max":1},"principal":"raw"}}`); resp.Error != nil {
		t.Fatalf("hello: %+v", resp.Error)
	}
	want(send(`{"id":"4","op":"no.such.op"}`), contract.CodeUnknownRequest)
	resp := send(`{"id":"5","op":"lease.request","input":{"platform":"ios","colour":"blue"}}`)
	want(resp, contract.CodeBadRequest)
	if resp.Error != nil && resp.Error.Details["field"] != "colour" {
		t.Errorf("BAD_REQUEST names %v, want colour", resp.Error.Details)
	}
	if string(resp.ID) != `"5"` {
		t.Errorf("response id = %s, want the request's", resp.ID)
	}
	// An id that is not valid UTF-8 is not echoed (the answer would not be
	// JSON: send fails on it), and a null id is no id: neither call runs.
	for _, frame := range []string{"{\"id\":\"a\xff\xfe\",\"op\":\"status.get\"}", `{"id":null,"op":"status.get"}`, `{"op":"status.get"}`} {
		resp := send(frame)
		want(resp, contract.CodeBadFrame)
		if string(resp.ID) != "null" {
			t.Errorf("%q answered with id %s, want null", frame, resp.ID)
		}
	}
	// Names are exact and said once: a key in another case or twice is
	// refused before anything runs, in the frame and in its input.
	want(send(`{"id":"7","OP":"status.get"}`), contract.CodeBadFrame)
	want(send(`{"id":"8","op":"status.get","op":"lease.release"}`), contract.CodeBadFrame)
	resp = send(`{"id":"9","op":"lease.renew","input":{"leaseId":"lse_0000000000000000","TTLMS":5000}}`)
	want(resp, contract.CodeBadRequest)
	if resp.Error != nil && (resp.Error.Details["field"] != "TTLMS" || resp.Error.Details["didYouMean"] != "ttlMs") {
		t.Errorf("an input key in another case: %+v, want BAD_REQUEST on TTLMS, did you mean ttlMs", resp.Error)
	}
	if resp := send(`{"id":6,"op":"status.get"}`); resp.Error != nil || string(resp.ID) != "6" {
		t.Errorf("session no longer answers: %+v", resp)
	}
}

func TestSecondDaemonOnSameHomeIsRefused(t *testing.T) {
	_, home := startDaemon(t, nil)
	_, err := Start(context.Background(), Options{Home: home})
	if !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second start: %v", err)
	}
	// The first still serves.
	if _, err := dial(t, home, "a", false).Status(context.Background()); err != nil {
		t.Errorf("first daemon after a refused second: %v", err)
	}
}

func TestHolderHearsItsLeaseExpire(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"lease":{"minTtlMs":100}}`)) // below the default minimum, to expire soon
	if err != nil {
		t.Fatal(err)
	}
	_, home := startDaemon(t, cfg)
	c := dial(t, home, "a", false)
	g, err := c.RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformAndroid, TTLMs: 100}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-c.LeaseLost():
		if p.LeaseID != g.Lease.ID || p.Reason != "expired" {
			t.Errorf("push = %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no lease-lost push within 10s of a 100ms TTL")
	}
}

func TestClosingTheSessionWithdrawsItsQueuedRequest(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"capacity":{"strategy":"fixed","config":{"maxRunning":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, home := startDaemon(t, cfg)
	a := dial(t, home, "a", false)
	if _, err := a.RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil); err != nil {
		t.Fatal(err)
	}
	b := dial(t, home, "b", false)
	queued := make(chan struct{})
	go b.RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformIOS}, func(p contract.LeaseProgress) {
		if p.Stage == contract.StageQueued {
			close(queued)
		}
	})
	<-queued
	b.Close()
	admin := dial(t, home, "ops", true)
	events, _, err := admin.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The withdrawal may already have happened; check the list, then wait
	// for the rejection if it has not.
	for {
		res, err := admin.List(context.Background(), contract.ListRequests)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Requests) == 0 {
			return
		}
		ev := <-events
		if ev.Event == "lease.rejected" && strings.Contains(string(ev.Payload), `"cancelled"`) {
			return
		}
	}
}

func TestWaitersHearDaemonStoppingBeforeTheSessionCloses(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"capacity":{"strategy":"fixed","config":{"maxRunning":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, home := startDaemon(t, cfg)
	a := dial(t, home, "a", false)
	if _, err := a.RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil); err != nil {
		t.Fatal(err)
	}
	b := dial(t, home, "b", false)
	queued := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		_, err := b.RequestLease(context.Background(), contract.LeaseRequestInput{Platform: contract.PlatformIOS}, func(p contract.LeaseProgress) {
			if p.Stage == contract.StageQueued {
				close(queued)
			}
		})
		result <- err
	}()
	<-queued
	if err := d.Stop("test"); err != nil {
		t.Fatal(err)
	}
	if err := <-result; code(err) != contract.CodeDaemonStopping {
		t.Errorf("waiter got %v, want DAEMON_STOPPING", err)
	}
}

func TestPassthroughChecksTheLease(t *testing.T) {
	_, home := startDaemon(t, nil)
	c := dial(t, home, "a", false)
	ctx := context.Background()
	g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res contract.PassthroughResult
	err = c.Call(ctx, contract.OpPassthrough, contract.PassthroughInput{Tool: "adb", Args: []string{"devices"}, LeaseID: g.Lease.ID}, &res)
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != contract.CodePassthroughRefused || ce.Details["leaseId"] != g.Lease.ID {
		t.Errorf("adb with an iOS lease: %v, want PASSTHROUGH_REFUSED naming the lease", err)
	}
	other := dial(t, home, "b", false)
	err = other.Call(ctx, contract.OpPassthrough, contract.PassthroughInput{Tool: "simctl", Args: []string{"list"}, LeaseID: g.Lease.ID}, &res)
	if code(err) != contract.CodeUnknownLease {
		t.Errorf("simctl with another agent's lease: %v, want UNKNOWN_LEASE", err)
	}
	err = c.Call(ctx, contract.OpPassthrough, contract.PassthroughInput{Tool: "fastboot"}, &res)
	if code(err) != contract.CodeBadRequest {
		t.Errorf("unknown tool: %v, want BAD_REQUEST", err)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Errorf("the session stopped answering: %v", err)
	}
}

// An empty list is an empty list in the answer ("leases":[]), not a
// missing key.
func TestAnEmptyListKeepsItsKey(t *testing.T) {
	_, home := startDaemon(t, nil)
	c := dial(t, home, "op", true)
	for kind, want := range map[contract.ListKind]string{
		contract.ListDevices: `{"devices":[]}`, contract.ListLeases: `{"leases":[]}`, contract.ListRequests: `{"requests":[]}`,
	} {
		var raw json.RawMessage
		if err := c.Call(context.Background(), contract.OpListGet, contract.ListGetInput{Kind: kind}, &raw); err != nil {
			t.Fatal(err)
		}
		if string(raw) != want {
			t.Errorf("list.get %s on an empty daemon = %s, want %s", kind, raw, want)
		}
	}
}

// Calls written right behind hello, in the same write, wait for it: none is
// refused as sent before the handshake.
func TestCallsPipelinedBehindHelloWaitForIt(t *testing.T) {
	_, home := startDaemon(t, nil)
	conn, err := net.Dial("unix", SocketPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	frames := `{"id":"h","op":"hello","input":{"protocol":{"min":1,"max":1},"principal":"eager"}}` + "\n"
	const calls = 20
	for i := range calls {
		op := []string{"status.get", "lease.list", "catalog.get"}[i%3]
		frames += `{"id":` + strconv.Itoa(i) + `,"op":"` + op + `"}` + "\n"
	}
	if _, err := conn.Write([]byte(frames)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReaderSize(conn, 1<<20)
	for range calls + 1 {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the answers: %v", err)
		}
		var resp contract.Response
		if err := json.Unmarshal(line, &resp); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if resp.Error != nil {
			t.Fatalf("call %s, pipelined behind hello, answered %v", resp.ID, resp.Error)
		}
	}
}

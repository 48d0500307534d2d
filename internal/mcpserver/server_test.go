package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/daemontest"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// rig is an in-process daemon with one MCP session on it.
type rig struct {
	t     *testing.T
	home  string
	cs    *mcp.ClientSession
	mu    sync.Mutex
	warns []*mcp.LoggingMessageParams
	heard chan struct{}
	done  chan struct{}
	// d is the daemon; restart starts it again on the same home once
	// stopped.
	d       *daemon.Daemon
	restart func()
}

func newRig(t *testing.T, settings ...string) *rig {
	t.Helper()
	return newRigWith(t, nil, settings...)
}

// newRigWith is newRig with each demo driver passed through wrap (when not
// nil) before the daemon starts.
func newRigWith(t *testing.T, wrap func(*demo.Driver) driver.Driver, settings ...string) *rig {
	t.Helper()
	opts := []daemontest.Option{daemontest.Set(settings...), daemontest.DemoTimes(20*time.Millisecond, 20*time.Millisecond)}
	if wrap != nil {
		opts = append(opts, daemontest.WrapDemo(wrap))
	}
	dt := daemontest.Start(t, opts...)
	r := &rig{t: t, home: dt.Home, heard: make(chan struct{}, 64), done: make(chan struct{}), d: dt.Daemon()}
	r.restart = func() {
		dt.Restart()
		r.d = dt.Daemon()
	}
	serverT, clientT := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(r.done)
		_ = Run(ctx, Options{Dial: r.dial("agent-1"), AgentID: "agent-1", Tick: 50 * time.Millisecond}, serverT)
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			r.mu.Lock()
			r.warns = append(r.warns, req.Params)
			r.mu.Unlock()
			r.heard <- struct{}{}
		},
	})
	cs, err := c.Connect(context.Background(), clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.cs = cs
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-r.done
	})
	return r
}

func (r *rig) dial(principal string) func(ctx context.Context, _ bool) (*client.Client, error) {
	return func(ctx context.Context, _ bool) (*client.Client, error) {
		return client.Dial(ctx, daemon.SocketPath(r.home), contract.HelloInput{Principal: principal})
	}
}

func (r *rig) admin() *client.Client {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.home, daemon.AdminTokenName))
	if err != nil {
		r.t.Fatal(err)
	}
	c, err := client.Dial(context.Background(), daemon.SocketPath(r.home), contract.HelloInput{Principal: "op", AdminToken: strings.TrimSpace(string(b))})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	return c
}

func (r *rig) call(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, map[string]any, error) {
	res, err := r.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, nil, err
	}
	var out map[string]any
	_ = json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &out)
	return res, out, nil
}

func TestLostLeaseIsAWarningNamingLeaseAndReason(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	res, grant, err := r.call(ctx, "lease_simulator", map[string]any{"platform": "ios"})
	if err != nil || res.IsError {
		t.Fatalf("lease: %v %v", err, grant)
	}
	leaseID := grant["lease"].(map[string]any)["id"].(string)
	if _, err := r.admin().ReleaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.heard:
	case <-time.After(10 * time.Second):
		t.Fatal("no warning after an operator released the lease")
	}
	r.mu.Lock()
	w := r.warns[0]
	r.mu.Unlock()
	data, _ := w.Data.(map[string]any)
	if w.Level != "warning" || data["lease_id"] != leaseID || data["reason"] != "killed" || !strings.Contains(data["message"].(string), leaseID) {
		t.Errorf("warning = %+v, want level warning naming %s, reason killed", w, leaseID)
	}
	_, st, _ := r.call(ctx, "lease_status", map[string]any{"leaseId": leaseID})
	if st["held"] != false || st["reason"] != "killed" {
		t.Errorf("lease_status after the loss = %v", st)
	}
}

func TestCancelledCallWithdrawsTheRequest(t *testing.T) {
	r := newRig(t, "capacity.strategy", "fixed", "capacity.config.maxRunning", "1")
	ctx := context.Background()
	other, err := client.Dial(ctx, daemon.SocketPath(r.home), contract.HelloInput{Principal: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil); err != nil {
		t.Fatal(err)
	}
	admin := r.admin()
	evs, _, err := admin.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithCancel(ctx)
	errs := make(chan error, 1)
	go func() {
		_, _, err := r.call(callCtx, "lease_simulator", map[string]any{"platform": "ios"})
		errs <- err
	}()
	queued := awaitEvent(t, evs, "lease.queued", "")
	cancel()
	<-errs
	rejected := awaitEvent(t, evs, "lease.rejected", "cancelled")
	if rejected["requestId"] != queued["requestId"] {
		t.Errorf("withdrawn request %v, want the queued %v", rejected["requestId"], queued["requestId"])
	}
}

// awaitEvent reads events until one named name (with payload reason, when
// given) and returns its payload.
func awaitEvent(t *testing.T, evs <-chan contract.Event, name, reason string) map[string]any {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-evs:
			var p map[string]any
			_ = json.Unmarshal(ev.Payload, &p)
			if ev.Event == name && (reason == "" || p["reason"] == reason) {
				return p
			}
		case <-timeout:
			t.Fatalf("no %s event", name)
		}
	}
}

// release_simulator is idempotent, as its hint says: a second release of a
// lease this session released succeeds with released:false, and
// lease_status without an id still says how the last lease ended.
func TestASecondReleaseSucceedsAndStatusRemembersTheLastLease(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	_, g, err := r.call(ctx, "lease_simulator", map[string]any{"platform": "android"})
	if err != nil {
		t.Fatal(err)
	}
	leaseID := g["lease"].(map[string]any)["id"].(string)
	for i, want := range []bool{true, false} {
		res, out, err := r.call(ctx, "release_simulator", map[string]any{"leaseId": leaseID})
		if err != nil || res.IsError || out["released"] != want || out["leaseId"] != leaseID {
			t.Fatalf("release %d = %v (isError %v, %v), want released:%v", i+1, out, res != nil && res.IsError, err, want)
		}
	}
	_, st, err := r.call(ctx, "lease_status", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if st["held"] != false || st["leaseId"] != leaseID || st["reason"] != "explicit" {
		t.Errorf("lease_status with no id after the release = %v, want held:false for %s with reason explicit", st, leaseID)
	}
	// A lease this session never had is still an error.
	res, out, err := r.call(ctx, "release_simulator", map[string]any{"leaseId": "lse_0000000000000000"})
	if err != nil || !res.IsError || out["code"] != string(contract.CodeUnknownLease) {
		t.Errorf("release of an unknown lease = %v, want the UNKNOWN_LEASE tool error", out)
	}
}

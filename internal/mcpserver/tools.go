package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/contract"
)

// Bounds of one wait inside a tool call: many clients abandon a call after
// about a minute, whatever progress they receive.
const (
	defaultWaitSeconds = 45
	maxWaitSeconds     = 55
)

type listDevicesInput struct {
	Platform contract.Platform `json:"platform,omitempty" jsonschema:"only this platform (ios or android); omit for both"`
}

func (in *listDevicesInput) Validate() error {
	return (&contract.CatalogGetInput{Platform: in.Platform}).Validate()
}

type leaseInput struct {
	Platform       contract.Platform    `json:"platform" jsonschema:"ios for an iOS simulator, android for an Android emulator"`
	Model          string               `json:"model,omitempty" jsonschema:"a device model from list_devices, such as iPhone 16 or Pixel 9; give a model or a class, not both"`
	Class          contract.DeviceClass `json:"class,omitempty" jsonschema:"a kind of device when any model of it will do: phone, tablet, watch, tv, vision, auto or desktop"`
	OSVersion      string               `json:"osVersion,omitempty" jsonschema:"OS version: exact (18.6), a prefix (18) or a range (>=18 <26); omit for the newest installed"`
	ImageTag       string               `json:"imageTag,omitempty" jsonschema:"Android only: the system image tag, such as google_apis or google_apis_playstore (list_devices shows the installed images); omit for any installed image"`
	Mode           contract.DeviceMode  `json:"mode,omitempty" jsonschema:"slim or full: slim (iOS 18.5 and later) disables background services so the simulator boots faster and uses less memory, best effort; full is every service, guaranteed; omit for the daemon's default (full unless ios.defaultMode says slim); the grant's device.mode says which you got"`
	TTLMs          int64                `json:"ttlMs,omitempty" jsonschema:"lease lifetime between renewals in milliseconds, from lease.minTtlMs (10000 by default) to lease.maxTtlMs; this server renews it for you while it runs; omit for the daemon's default"`
	TimeoutMs      int64                `json:"timeoutMs,omitempty" jsonschema:"give up (QUEUE_TIMEOUT) if no device is free within this many milliseconds; omit to wait until cancelled"`
	NoWait         bool                 `json:"noWait,omitempty" jsonschema:"fail at once with NO_CAPACITY instead of queueing"`
	AllowDownload  bool                 `json:"allowDownload,omitempty" jsonschema:"download the OS runtime if it is not installed (takes 10 to 20 minutes; progress shows a downloading stage); without it a missing runtime fails with RUNTIME_MISSING"`
	WaitSeconds    *int64               `json:"waitSeconds,omitempty" jsonschema:"longest this call waits before answering pending (default 45, at most 55); the request keeps its place, continue with wait_for_lease"`
	ClientKey      string               `json:"clientKey,omitempty" jsonschema:"a key of your choice (1 to 200 letters, digits and ._:@/+=-) that makes this call idempotent: a call repeated with the same key, in this session or a later one of the same token (after a broken connection, say), joins the first call's request, or answers what it ended with, instead of making a second; over HTTP a keyed request keeps its place when its session ends, only cancelling the call withdraws it"`
	IdempotencyKey string               `json:"idempotencyKey,omitempty" jsonschema:"the same as clientKey, under its older name; give one of them"`
	LeaseID        string               `json:"leaseId,omitempty" jsonschema:"the id the lease is to have, of your choice: 1 to 64 ASCII letters, digits, _ and -, starting with a letter or digit; LEASE_ID_TAKEN while another active lease or waiting request of yours has it; another agent may choose the same id for its own lease"`
}

func (in *leaseInput) request() contract.LeaseRequestInput {
	return contract.LeaseRequestInput{
		Platform: in.Platform, Model: in.Model, Class: in.Class, OSVersion: in.OSVersion, ImageTag: in.ImageTag, Mode: in.Mode,
		TTLMs: in.TTLMs, TimeoutMs: in.TimeoutMs, NoWait: in.NoWait, AllowDownload: in.AllowDownload, IdempotencyKey: in.key(),
		LeaseID: in.LeaseID,
	}
}

// key is the call's client key, under either of its names.
func (in *leaseInput) key() string {
	if in.ClientKey != "" {
		return in.ClientKey
	}
	return in.IdempotencyKey
}

func (in *leaseInput) Validate() error {
	if err := checkWait(in.WaitSeconds); err != nil {
		return err
	}
	if err := contract.CheckKey("clientKey", in.ClientKey); err != nil {
		return err
	}
	if in.ClientKey != "" && in.IdempotencyKey != "" && in.ClientKey != in.IdempotencyKey {
		return contract.BadRequest("clientKey", "give clientKey or idempotencyKey (its older name), not two different keys")
	}
	req := in.request()
	if err := req.Validate(); err != nil {
		return err
	}
	return nil
}

func checkWait(w *int64) error {
	if w != nil && (*w < 1 || *w > maxWaitSeconds) {
		return contract.BadRequest("waitSeconds", "must be from 1 to %d, got %d", maxWaitSeconds, *w)
	}
	return nil
}

func waitOf(w *int64) time.Duration {
	if w == nil {
		return defaultWaitSeconds * time.Second
	}
	return time.Duration(*w) * time.Second
}

type waitInput struct {
	RequestID   string `json:"requestId" jsonschema:"the requestId a pending answer gave"`
	WaitSeconds *int64 `json:"waitSeconds,omitempty" jsonschema:"longest this call waits before answering pending again (default 45, at most 55)"`
}

func (in *waitInput) Validate() error {
	if err := checkWait(in.WaitSeconds); err != nil {
		return err
	}
	return (&contract.LeaseRequestGetInput{RequestID: in.RequestID}).Validate()
}

type leaseIDInput struct {
	LeaseID string `json:"leaseId" jsonschema:"the lease id from the grant (lease.id)"`
}

func (in *leaseIDInput) Validate() error {
	return (&contract.LeaseIDInput{LeaseID: in.LeaseID}).Validate()
}

type statusInput struct {
	LeaseID string `json:"leaseId,omitempty" jsonschema:"the lease to check (lease.id of the grant); may be left out only while this session holds exactly one lease, or none (then it says how the last one ended)"`
}

func (in *statusInput) Validate() error {
	if in.LeaseID == "" {
		return nil
	}
	return (&contract.LeaseIDInput{LeaseID: in.LeaseID}).Validate()
}

// pendingResult answers a wait that ran out before a grant.
type pendingResult struct {
	State         string `json:"state"`
	RequestID     string `json:"requestId"`
	Stage         string `json:"stage"`
	QueuePosition int    `json:"queuePosition,omitempty"`
	EtaMs         int64  `json:"etaMs,omitempty"`
	Message       string `json:"message"`
}

// statusResult answers lease_status.
type statusResult struct {
	Held          bool   `json:"held"`
	LeaseID       string `json:"leaseId,omitempty"`
	DeviceID      string `json:"deviceId,omitempty"`
	Address       string `json:"address,omitempty"`
	Platform      string `json:"platform,omitempty"`
	Model         string `json:"model,omitempty"`
	OSVersion     string `json:"osVersion,omitempty"`
	TTLMs         int64  `json:"ttlMs,omitempty"`
	TTLDeadline   int64  `json:"ttlDeadline,omitempty"`
	ExpiresAt     string `json:"expiresAt,omitempty"`
	RemainingMs   int64  `json:"remainingMs,omitempty"`
	LastRenewedAt int64  `json:"lastRenewedAt,omitempty"`
	Reason        string `json:"reason,omitempty"`
	Message       string `json:"message,omitempty"`
}

// inputSchema derives a tool's input schema from its input struct: every
// field described, unknown properties refused, enums and bounds spelled out.
func inputSchema[T any]() *jsonschema.Schema {
	enum := func(vals ...string) *jsonschema.Schema {
		s := &jsonschema.Schema{Type: "string"}
		for _, v := range vals {
			s.Enum = append(s.Enum, v)
		}
		return s
	}
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[contract.Platform]():    enum("ios", "android"),
		reflect.TypeFor[contract.DeviceClass](): enum("phone", "tablet", "watch", "tv", "vision", "auto", "desktop"),
	}})
	if err != nil {
		panic(fmt.Sprintf("input schema of %T: %v", *new(T), err))
	}
	if w, ok := s.Properties["waitSeconds"]; ok {
		w.Types, w.Type = nil, "integer"
		lo, hi := 1.0, float64(maxWaitSeconds)
		w.Minimum, w.Maximum = &lo, &hi
	}
	if w, ok := s.Properties["timeoutSeconds"]; ok {
		w.Types, w.Type = nil, "integer"
		lo, hi := 1.0, float64(maxExecSeconds)
		w.Minimum, w.Maximum = &lo, &hi
	}
	if t, ok := s.Properties["tool"]; ok {
		t.Enum = []any{"simctl", "adb"}
	}
	for _, name := range []string{"ttlMs", "timeoutMs"} {
		if p, ok := s.Properties[name]; ok {
			lo := 1.0
			p.Minimum = &lo
		}
	}
	return s
}

// register adds the tools.
func (s *server) register(srv *mcp.Server) {
	srv.AddTool(&mcp.Tool{
		Name:        "list_devices",
		Title:       "List device models and OS versions",
		Description: "Lists, per platform, the device models and OS versions (runtimes) simlock can give you, which models each runtime runs, model aliases and classes. Use it to pick a model or osVersion for lease_simulator.",
		InputSchema: inputSchema[listDevicesInput](),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, handle(s.listDevices))
	srv.AddTool(&mcp.Tool{
		Name:  "lease_simulator",
		Title: "Lease a simulator or emulator",
		Description: "Gets you a booted iOS simulator or Android emulator that no other agent touches until you release it. " +
			"If none is free you wait in a fair queue; with a progress token you see each step (queued, creating, booting). " +
			"Answers with the grant (device address, lease id, environment to use), or after waitSeconds with {\"state\":\"pending\",\"requestId\":...}: " +
			"the request keeps its place, so call wait_for_lease with that requestId. One lease at a time per agent. " +
			"This server keeps the lease alive while it runs; release it with release_simulator when done.",
		InputSchema: inputSchema[leaseInput](),
	}, handle(s.leaseSimulator))
	srv.AddTool(&mcp.Tool{
		Name:  "wait_for_lease",
		Title: "Keep waiting for a pending lease",
		Description: "Continues the wait of a lease_simulator call that answered pending. " +
			"Answers with the grant, or pending again after waitSeconds, or the error that ended the request (QUEUE_TIMEOUT, for example).",
		InputSchema: inputSchema[waitInput](),
	}, handle(s.waitForLease))
	srv.AddTool(&mcp.Tool{
		Name:        "release_simulator",
		Title:       "Release a leased device",
		Description: "Gives a leased device back so the next agent can have it. Only your own leases. The device is wiped before anyone else gets it.",
		InputSchema: inputSchema[leaseIDInput](),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true},
	}, handle(s.releaseSimulator))
	srv.AddTool(&mcp.Tool{
		Name:        "lease_status",
		Title:       "Is my lease still held?",
		Description: "Says whether a lease is still yours and until when (expiresAt, remainingMs); this server renews it while it runs. If it is gone, says why.",
		InputSchema: inputSchema[statusInput](),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, handle(s.leaseStatus))
	srv.AddTool(&mcp.Tool{
		Name:  "run_on_device",
		Title: "Run simctl or adb on your leased device",
		Description: "Runs simctl (iOS) or adb (Android) on a device you lease, on the machine that has it, and answers with the exit code and the output (the last 64 KiB of each stream). " +
			"For simctl name the device by the udid from the grant; for adb the leased emulator is chosen for you. " +
			"For when you have no shell on that machine; with one, the grant's usage lines do the same. A command still running after timeoutSeconds is stopped (EXEC_TIMEOUT). " +
			"A lease from the demo driver (simulated devices, environment SIMLOCK_DEMO=1) has no simctl or adb to run: it is refused with PASSTHROUGH_REFUSED.",
		InputSchema: inputSchema[execInput](),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, handle(s.runOnDevice))
	s.registerDeviceTools(srv)
}

func ptr[T any](v T) *T { return &v }

// handle adapts a typed tool function: strict decoding of the arguments
// (unknown fields and bad values are BAD_REQUEST naming the field), and
// every failure as an isError result carrying the contract's code.
func handle[In any, PIn interface {
	*In
	contract.Validator
}](f func(ctx context.Context, req *mcp.CallToolRequest, in *In) (any, error)) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in In
		if err := contract.DecodeInput(req.Params.Arguments, PIn(&in)); err != nil {
			return errorResult(err), nil
		}
		out, err := f(ctx, req, &in)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil, err
			}
			return errorResult(err), nil
		}
		return okResult(out), nil
	}
}

func okResult(v any) *mcp.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil {
		return errorResult(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}

func errorResult(err error) *mcp.CallToolResult {
	ce := contract.AsError(err)
	b, _ := json.Marshal(ce)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}

func (s *server) listDevices(ctx context.Context, _ *mcp.CallToolRequest, in *listDevicesInput) (any, error) {
	c, err := s.daemon(ctx, true)
	if err != nil {
		return nil, err
	}
	return c.Catalog(ctx, in.Platform)
}

func (s *server) leaseSimulator(ctx context.Context, req *mcp.CallToolRequest, in *leaseInput) (any, error) {
	c, err := s.daemon(ctx, true)
	if err != nil {
		return nil, err
	}
	// The create is not cut short by a cancel: a request the daemon made
	// must be known here, so that it can be withdrawn.
	createCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var st contract.LeaseRequestStatus
	if err := c.Call(createCtx, contract.OpLeaseRequestCreate, in.request(), &st); err != nil {
		return nil, withHint(err)
	}
	return s.await(ctx, req, s.follow(st), waitOf(in.WaitSeconds))
}

func (s *server) waitForLease(ctx context.Context, req *mcp.CallToolRequest, in *waitInput) (any, error) {
	s.mu.Lock()
	t := s.requests[in.RequestID]
	s.mu.Unlock()
	if t == nil {
		// A request this server does not follow yet (made before a
		// restart of the server, say): look it up, then follow it.
		c, err := s.daemon(ctx, true)
		if err != nil {
			return nil, err
		}
		var st contract.LeaseRequestStatus
		if err := c.Call(ctx, contract.OpLeaseRequestGet, contract.LeaseRequestGetInput{RequestID: in.RequestID}, &st); err != nil {
			return nil, err
		}
		t = s.follow(st)
	}
	return s.await(ctx, req, t, waitOf(in.WaitSeconds))
}

// await waits on a followed request for at most budget, sending progress
// when the call carries a progress token. A client that cancels the call
// withdraws the request.
func (s *server) await(ctx context.Context, req *mcp.CallToolRequest, t *tracked, budget time.Duration) (any, error) {
	token := req.Params.GetProgressToken()
	var rep reporter
	deadline := time.NewTimer(budget)
	defer deadline.Stop()
	tick := time.NewTicker(s.opts.Tick)
	defer tick.Stop()
	for {
		st, ferr, changed := t.snapshot()
		if token != nil {
			if p, msg, ok := rep.step(st, time.Now(), 3*s.opts.Tick); ok {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: p, Total: progressTotal, Message: msg,
				})
			}
		}
		switch {
		case st.Request.State == contract.RequestGranted && st.Request.Grant != nil:
			return withUsage(st.Request.Grant), nil
		case st.Request.State.Terminal():
			if st.Request.Error != nil {
				return nil, st.Request.Error
			}
			return nil, contract.Errorf(contract.CodeCancelled, "request %s was %s", st.Request.ID, st.Request.State)
		case ferr != nil:
			return nil, ferr
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-deadline.C:
			return pending(st), nil
		case <-ctx.Done():
			s.withdraw(t.id)
			return nil, ctx.Err()
		case <-s.closing.Done():
			if t.keptAtEnd(s.opts.LeasesOutliveSession) {
				return nil, contract.Errorf(contract.CodeCancelled, "the MCP session ended; request %s keeps its place: call lease_simulator with the same clientKey to join it", t.id)
			}
			s.withdraw(t.id)
			return nil, contract.Errorf(contract.CodeCancelled, "the MCP session ended; request %s was withdrawn", t.id)
		}
	}
}

func pending(st contract.LeaseRequestStatus) pendingResult {
	var rep reporter
	_, msg, _ := rep.step(st, time.Now(), 0)
	p := pendingResult{State: "pending", RequestID: st.Request.ID, Stage: st.Phase(),
		Message: msg + ". Call wait_for_lease with this requestId to keep waiting; the request keeps its place."}
	if p.Stage == "queued" {
		p.QueuePosition = st.Request.QueuePosition
	}
	if st.Progress != nil && p.Stage != "queued" {
		p.EtaMs = st.Progress.EtaMs
	}
	return p
}

// withHint adds what to do next to errors an agent can act on.
func withHint(err error) error {
	ce := contract.AsError(err)
	if ce.Code == contract.CodeRequesterAlreadyLeased {
		hint := "release it with release_simulator first"
		if id, ok := ce.Details["existingRequestId"].(string); ok {
			hint = "call wait_for_lease with requestId " + id + " instead"
		}
		return ce.With("hint", hint)
	}
	return err
}

func (s *server) releaseSimulator(ctx context.Context, _ *mcp.CallToolRequest, in *leaseIDInput) (any, error) {
	res, err := s.release(ctx, in.LeaseID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"leaseId": res.LeaseID, "released": res.Released}, nil
}

func (s *server) leaseStatus(ctx context.Context, _ *mcp.CallToolRequest, in *statusInput) (any, error) {
	id := in.LeaseID
	if id == "" {
		ids := s.heldIDs()
		s.mu.Lock()
		last := s.lastGone
		reason, known := s.gone[last]
		if !known {
			last = "" // granted again since
		}
		s.mu.Unlock()
		if len(ids) == 0 {
			if last != "" {
				return statusResult{Held: false, LeaseID: last, Reason: reason,
					Message: "This session holds no lease. Its last, " + last + ", ended: " + lossWords(reason) + "."}, nil
			}
			return statusResult{Held: false, Message: "This session holds no lease."}, nil
		}
		var err error
		if id, err = s.leaseArg(""); err != nil {
			return nil, err
		}
	}
	c, err := s.daemon(ctx, true)
	if err != nil {
		return nil, err
	}
	var res contract.LeaseGetResult
	if err := c.Call(ctx, contract.OpLeaseGet, contract.LeaseIDInput{LeaseID: id}, &res); err != nil {
		if contract.AsError(err).Code == contract.CodeUnknownLease {
			s.mu.Lock()
			reason, ended := s.gone[id]
			_, held := s.held[id]
			s.mu.Unlock()
			if !ended && !held {
				// Never this session's: nothing of it "ended", it is unknown
				// (another agent's lease, a typo, one from long ago).
				return statusResult{Held: false, LeaseID: id, Reason: "unknown",
					Message: "Lease " + id + " is unknown: this session never held it, and the daemon has no lease of yours by that id. lease_status without leaseId shows the one you hold."}, nil
			}
			out := statusResult{Held: false, LeaseID: id, Reason: reason, Message: "Lease " + id + " is not held: " + lossWords(reason) + "."}
			return out, nil
		}
		return nil, err
	}
	l := res.Lease
	return statusResult{
		Held: true, LeaseID: l.ID, DeviceID: l.DeviceID, Address: res.Device.Address,
		Platform: string(res.Device.Spec.Platform), Model: res.Device.Spec.Model, OSVersion: res.Device.Spec.OSVersion,
		TTLMs: l.TTLMs, TTLDeadline: l.TTLDeadline, LastRenewedAt: l.LastRenewedAt,
		ExpiresAt:   time.UnixMilli(l.TTLDeadline).UTC().Format(time.RFC3339),
		RemainingMs: max(l.TTLDeadline-time.Now().UnixMilli(), 0),
	}, nil
}

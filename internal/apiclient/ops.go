package apiclient

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/simlock/simlock/internal/apiview"
	"github.com/simlock/simlock/internal/contract"
)

// Status is GET /v1/status.
func (c *Client) Status(ctx context.Context) (contract.Status, error) {
	return c.StatusWith(ctx, contract.StatusGetInput{})
}

// StatusWith is GET /v1/status, as a summary when in asks for one. The
// HTTP API answers a starting daemon at once (daemon and host only), so
// in.WaitReady asks for nothing more.
func (c *Client) StatusWith(ctx context.Context, in contract.StatusGetInput) (contract.Status, error) {
	var q url.Values
	if in.Summary {
		q = url.Values{"summary": {"true"}}
	}
	var st contract.Status
	return st, c.call(ctx, http.MethodGet, "/v1/status", q, nil, &st)
}

// ListPage answers the socket's list.get from the HTTP routes: leases from
// GET /v1/leases (whole: the route has no pages), devices from GET
// /v1/devices (an operator's). Requests have no route an agent may read;
// they are refused as FORBIDDEN.
func (c *Client) ListPage(ctx context.Context, in contract.ListGetInput) (contract.ListGetResult, error) {
	switch in.Kind {
	case contract.ListLeases:
		ls, err := c.Leases(ctx)
		if ls == nil {
			ls = []contract.LeaseRecord{}
		}
		return contract.ListGetResult{Leases: ls}, err
	case contract.ListDevices:
		var res struct {
			Devices []contract.Device `json:"devices"`
		}
		if err := c.call(ctx, http.MethodGet, "/v1/devices", nil, nil, &res); err != nil {
			return contract.ListGetResult{}, err
		}
		if res.Devices == nil {
			res.Devices = []contract.Device{}
		}
		return contract.ListGetResult{Devices: res.Devices}, nil
	}
	return contract.ListGetResult{}, contract.Errorf(contract.CodeForbidden, "the %s list is not served over HTTP to this client; ask on the daemon's machine", in.Kind)
}

// Catalog is GET /v1/catalog, of one platform or ("") all.
func (c *Client) Catalog(ctx context.Context, platform contract.Platform) (contract.CatalogResult, error) {
	var q url.Values
	if platform != "" {
		q = url.Values{"platform": {string(platform)}}
	}
	var res contract.CatalogResult
	return res, c.call(ctx, http.MethodGet, "/v1/catalog", q, nil, &res)
}

// CreateLeaseRequest is POST /v1/lease-requests: the request, created, or
// found again by in's idempotency key. A request without a key is given a
// fresh one, so that the call may be sent again (to another replica, when
// the connection broke after it was sent) without asking twice.
func (c *Client) CreateLeaseRequest(ctx context.Context, in contract.LeaseRequestInput) (apiview.RequestView, error) {
	if in.IdempotencyKey == "" {
		in.IdempotencyKey = newIdempotencyKey()
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	body, err := json.Marshal(apiview.NewLeaseRequestBody(in))
	if err != nil {
		return apiview.RequestView{}, fmt.Errorf("apiclient: encode: %w", err)
	}
	req, err := c.request(ctx, http.MethodPost, "/v1/lease-requests", nil, bytesReader(body))
	if err != nil {
		return apiview.RequestView{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if in.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", in.IdempotencyKey)
	}
	var env apiview.RequestEnvelope
	return env.Request, c.decode(req, &env, http.StatusCreated)
}

// newIdempotencyKey is a key no other request has: 128 random bits.
func newIdempotencyKey() string {
	return "apiclient-" + rand.Text()
}

// GetLeaseRequest is GET /v1/lease-requests/{id}.
func (c *Client) GetLeaseRequest(ctx context.Context, id string) (apiview.RequestView, error) {
	var env apiview.RequestEnvelope
	return env.Request, c.call(ctx, http.MethodGet, "/v1/lease-requests/"+esc(id), nil, nil, &env)
}

// CancelLeaseRequest is DELETE /v1/lease-requests/{id}.
func (c *Client) CancelLeaseRequest(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/v1/lease-requests/"+esc(id), nil, nil, nil, http.StatusNoContent)
}

// Cancel withdraws a waiting request, answered as the socket's
// lease.cancel: DELETE /v1/lease-requests/{id}, whose refusals are
// outcomes (not found, not cancellable with the lease it was granted). The
// HTTP API names a request by its id only, so one is required.
func (c *Client) Cancel(ctx context.Context, in contract.LeaseCancelInput) (contract.LeaseCancelResult, error) {
	if in.RequestID == "" {
		return contract.LeaseCancelResult{}, contract.Errorf(contract.CodeUsage,
			"over a remote profile, name the request to cancel by its id (simlock lease cancel <request-id>): the HTTP API finds no request by agent id")
	}
	res := contract.LeaseCancelResult{Outcome: contract.CancelCancelled, RequestID: in.RequestID}
	var ce *contract.Error
	switch err := c.CancelLeaseRequest(ctx, in.RequestID); {
	case err == nil:
	case errors.As(err, &ce) && ce.Code == contract.CodeUnknownLeaseRequest:
		res.Outcome = contract.CancelNotFound
	case errors.As(err, &ce) && ce.Code == contract.CodeRequestNotCancellable:
		res.Outcome = contract.CancelNotCancellable
		res.LeaseID, _ = ce.Details["leaseId"].(string)
	default:
		return contract.LeaseCancelResult{}, err
	}
	return res, nil
}

// resumeFor bounds how long a broken stream is tried again without one
// attempt getting through.
const resumeFor = 30 * time.Second

// FollowLeaseRequest follows a request's event stream until it settles,
// calling seen with each view, and returns the settled view. A stream that
// breaks is opened again with Last-Event-ID, so no change is seen twice
// and a request that settled meanwhile is still told; attempts go on for
// resumeFor without one getting through, then the break is
// DAEMON_CONNECTION_LOST.
func (c *Client) FollowLeaseRequest(ctx context.Context, id string, seen func(apiview.RequestView)) (apiview.RequestView, error) {
	var last apiview.RequestView
	lastID := ""
	var brokeAt time.Time
	wait := 100 * time.Millisecond
	for {
		settled, err := c.followOnce(ctx, id, &lastID, func(v apiview.RequestView) {
			last = v
			brokeAt = time.Time{}
			if seen != nil {
				seen(v)
			}
		})
		switch {
		case settled:
			return last, nil
		case ctx.Err() != nil:
			return last, ctx.Err()
		case err != nil && !broken(err):
			return last, err
		}
		if brokeAt.IsZero() {
			brokeAt, wait = time.Now(), 100*time.Millisecond
		}
		if time.Since(brokeAt) > resumeFor {
			return last, contract.Errorf(contract.CodeDaemonConnectionLost,
				"lost the stream of lease request %s and could not open it again for %s: %v", id, resumeFor, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// broken reports whether err is a break worth opening the stream again
// for: the server could not be reached or the stream ended early.
func broken(err error) bool {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errStreamEnded) {
		return true
	}
	var ce *contract.Error
	return errors.As(err, &ce) && ce.Code == contract.CodeDaemonConnectionLost
}

// errStreamEnded is a request stream that ended before the request settled.
var errStreamEnded = errors.New("the stream ended before the request settled")

// followOnce reads one stream of a request; settled is true once the
// settled request has been seen (in this stream or, by a 204, before).
func (c *Client) followOnce(ctx context.Context, id string, lastID *string, seen func(apiview.RequestView)) (settled bool, err error) {
	req, err := c.request(ctx, http.MethodGet, "/v1/lease-requests/"+esc(id)+"/events", nil, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	res, at, err := c.sendAt(req, http.StatusOK, http.StatusNoContent)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNoContent {
		return true, nil
	}
	sr := newSSEReader(res.Body)
	for {
		ev, err := sr.next()
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			// The server behind the stream may be gone (a replica that
			// led): the stream is opened again on the next one.
			c.leave(at)
			if err == io.EOF {
				return false, errStreamEnded
			}
			return false, contract.Errorf(contract.CodeDaemonConnectionLost, "the stream of lease request %s broke: %v", id, err)
		}
		if ev.name == "error" {
			return false, streamError(ev)
		}
		var v apiview.RequestView
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
			return false, contract.Errorf(contract.CodeInternal, "a %s event of lease request %s does not decode: %v", ev.name, id, err)
		}
		if ev.id != "" {
			*lastID = ev.id
		}
		seen(v)
		if _, open := v.Progress(); !open {
			return true, nil
		}
	}
}

// streamError is the error an error event carries.
func streamError(ev sseEvent) error {
	var eb apiview.ErrorBody
	if json.Unmarshal([]byte(ev.data), &eb) == nil && eb.Error != nil {
		return eb.Error
	}
	return contract.Errorf(contract.CodeInternal, "the stream failed: %s", ev.data)
}

// RequestLease asks for a device and waits for it, as the socket's
// lease.request does: progress is called with each step of the wait, and
// the grant is returned. When ctx ends first, the request is cancelled
// (best effort, within 10s) and ctx's error returned; a failed or
// cancelled request is its error.
func (c *Client) RequestLease(ctx context.Context, in contract.LeaseRequestInput, progress func(contract.LeaseProgress)) (contract.LeaseGrant, error) {
	v, err := c.CreateLeaseRequest(ctx, in)
	if err != nil {
		return contract.LeaseGrant{}, err
	}
	show := func(v apiview.RequestView) {
		if p, ok := v.Progress(); ok && progress != nil {
			progress(p)
		}
	}
	if _, open := v.Progress(); open {
		show(v)
		id := v.ID
		v, err = c.FollowLeaseRequest(ctx, id, show)
		if err != nil {
			if ctx.Err() != nil {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				_ = c.CancelLeaseRequest(cctx, id)
				cancel()
			}
			return contract.LeaseGrant{}, err
		}
	}
	return c.grantOf(ctx, v)
}

// grantOf is the grant of a settled request, or its error.
func (c *Client) grantOf(ctx context.Context, v apiview.RequestView) (contract.LeaseGrant, error) {
	switch {
	case v.Error != nil:
		return contract.LeaseGrant{}, v.Error
	case v.Lease == nil:
		return contract.LeaseGrant{}, contract.Errorf(contract.CodeInternal, "lease request %s settled %s without a lease or an error", v.ID, v.State)
	}
	rec, err := c.leaseRecord(ctx, v.Lease.ID)
	if err != nil {
		return contract.LeaseGrant{}, err
	}
	g := v.Lease.Grant(rec)
	if g.RequestID == "" {
		g.RequestID = v.ID
	}
	return g, nil
}

// leaseRecord is the caller's lease id as GET /v1/leases lists it.
func (c *Client) leaseRecord(ctx context.Context, id string) (contract.LeaseRecord, error) {
	ls, err := c.Leases(ctx)
	if err != nil {
		return contract.LeaseRecord{}, err
	}
	for _, l := range ls {
		if l.ID == id || l.Key == id {
			return l, nil
		}
	}
	return contract.LeaseRecord{}, contract.Errorf(contract.CodeUnknownLease, "no lease %s", id).With("leaseId", id)
}

// Leases is GET /v1/leases: the leases the caller may see.
func (c *Client) Leases(ctx context.Context) ([]contract.LeaseRecord, error) {
	var res contract.LeaseListResult
	if err := c.call(ctx, http.MethodGet, "/v1/leases", nil, nil, &res); err != nil {
		return nil, err
	}
	return res.Leases, nil
}

// Lease is GET /v1/leases/{id}.
func (c *Client) Lease(ctx context.Context, id string) (apiview.LeaseView, error) {
	var env apiview.LeaseEnvelope
	return env.Lease, c.call(ctx, http.MethodGet, "/v1/leases/"+esc(id), nil, nil, &env)
}

// RenewLease is POST /v1/leases/{id}/renew (ttlMs 0: the lease's own).
func (c *Client) RenewLease(ctx context.Context, id string, ttlMs int64) (apiview.RenewView, error) {
	var v apiview.RenewView
	return v, c.call(ctx, http.MethodPost, "/v1/leases/"+esc(id)+"/renew", nil, apiview.RenewBody{TTLMs: ttlMs}, &v)
}

// Renew renews a lease and returns its record, as the socket's lease.renew
// answers.
func (c *Client) Renew(ctx context.Context, id string, ttlMs int64) (contract.LeaseRecord, error) {
	if _, err := c.RenewLease(ctx, id, ttlMs); err != nil {
		return contract.LeaseRecord{}, err
	}
	return c.leaseRecord(ctx, id)
}

// Release is DELETE /v1/leases/{id}, answered as the socket's lease.release.
func (c *Client) Release(ctx context.Context, id string) (contract.ReleaseResult, error) {
	var v apiview.ReleaseView
	if err := c.call(ctx, http.MethodDelete, "/v1/leases/"+esc(id), nil, nil, &v, http.StatusAccepted); err != nil {
		return contract.ReleaseResult{}, err
	}
	return contract.ReleaseResult{LeaseID: v.LeaseID, DeviceID: v.Device.ID, Released: v.Released}, nil
}

// LeaseNotice is one event of a lease's stream: Lost is set on the last,
// lease_lost; Device on device_unhealthy and device_recovered.
type LeaseNotice struct {
	Event  string
	Lost   *apiview.LeaseLostView
	Device *apiview.DeviceNotice
}

// WatchLease follows GET /v1/leases/{id}/events, calling seen with each
// notice, until the lease is lost (nil), the stream fails (its error), or
// ctx ends. A stream that breaks is DAEMON_CONNECTION_LOST; the caller
// decides whether to watch again.
func (c *Client) WatchLease(ctx context.Context, id string, seen func(LeaseNotice)) error {
	req, err := c.request(ctx, http.MethodGet, "/v1/leases/"+esc(id)+"/events", nil, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	res, at, err := c.sendAt(req, http.StatusOK)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	sr := newSSEReader(res.Body)
	for {
		ev, err := sr.next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.leave(at) // the watch, when it is opened again, goes to the next replica
			return contract.Errorf(contract.CodeDaemonConnectionLost, "the stream of lease %s broke: %v", id, err)
		}
		n := LeaseNotice{Event: ev.name}
		switch ev.name {
		case "error":
			return streamError(ev)
		case "lease_lost":
			n.Lost = new(apiview.LeaseLostView)
			err = json.Unmarshal([]byte(ev.data), n.Lost)
		default:
			n.Device = new(apiview.DeviceNotice)
			err = json.Unmarshal([]byte(ev.data), n.Device)
		}
		if err != nil {
			return contract.Errorf(contract.CodeInternal, "a %s event of lease %s does not decode: %v", ev.name, id, err)
		}
		seen(n)
		if n.Lost != nil {
			return nil
		}
	}
}

// Replay is GET /v1/events: past events, oldest first. in.SinceTs is
// sent as the duration before now the route takes.
func (c *Client) Replay(ctx context.Context, in contract.EventsReplayInput) ([]contract.Event, error) {
	q := url.Values{}
	if in.SinceTs > 0 {
		q.Set("since", strconv.FormatInt(max(time.Since(time.UnixMilli(in.SinceTs)).Milliseconds(), 1), 10)+"ms")
	}
	if in.AfterSeq > 0 {
		q.Set("afterSeq", strconv.FormatInt(in.AfterSeq, 10))
	}
	if in.Limit > 0 {
		q.Set("limit", strconv.Itoa(in.Limit))
	}
	var res contract.EventsReplayResult
	return res.Events, c.call(ctx, http.MethodGet, "/v1/events", q, nil, &res)
}

// Subscribe opens GET /v1/events/stream and returns its events as they
// come, from the moment it returns: the channel is closed when the stream
// ends or ctx does. The seq it returns is 0 (the stream does not say where
// it starts).
func (c *Client) Subscribe(ctx context.Context) (<-chan contract.Event, int64, error) {
	res, err := c.openEvents(ctx, 0)
	if err != nil {
		return nil, 0, err
	}
	ch := make(chan contract.Event, 64)
	go func() {
		defer close(ch)
		defer res.Body.Close()
		_ = readEvents(ctx, res.Body, func(e contract.Event) {
			select {
			case ch <- e:
			case <-ctx.Done():
			}
		})
	}()
	return ch, 0, nil
}

// Events follows GET /v1/events/stream from after seq afterSeq (0: from
// now), calling seen with each event, until ctx ends or the stream fails.
func (c *Client) Events(ctx context.Context, afterSeq int64, seen func(contract.Event)) error {
	res, err := c.openEvents(ctx, afterSeq)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	return readEvents(ctx, res.Body, seen)
}

func (c *Client) openEvents(ctx context.Context, afterSeq int64) (*http.Response, error) {
	req, err := c.request(ctx, http.MethodGet, "/v1/events/stream", nil, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if afterSeq > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(afterSeq, 10))
	}
	return c.send(req, http.StatusOK)
}

func readEvents(ctx context.Context, body io.Reader, seen func(contract.Event)) error {
	sr := newSSEReader(body)
	for {
		ev, err := sr.next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return contract.Errorf(contract.CodeDaemonConnectionLost, "the event stream broke: %v", err)
		}
		if ev.name == "error" {
			return streamError(ev)
		}
		var e contract.Event
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			return contract.Errorf(contract.CodeInternal, "an event does not decode: %v", err)
		}
		seen(e)
	}
}

// Exec is POST /v1/leases/{id}/exec: output is called with each chunk, and
// the command's exit is returned.
func (c *Client) Exec(ctx context.Context, in contract.ExecInput, output func(contract.ExecOutput)) (contract.ExecResult, error) {
	body, err := json.Marshal(apiview.ExecBody{Tool: in.Tool, Args: in.Args, Stdin: in.Stdin, RequesterID: in.RequesterID})
	if err != nil {
		return contract.ExecResult{}, fmt.Errorf("apiclient: encode: %w", err)
	}
	req, err := c.request(ctx, http.MethodPost, "/v1/leases/"+esc(in.LeaseID)+"/exec", nil, bytesReader(body))
	if err != nil {
		return contract.ExecResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := c.send(req, http.StatusOK)
	if err != nil {
		return contract.ExecResult{}, err
	}
	defer res.Body.Close()
	sr := newSSEReader(res.Body)
	for {
		ev, err := sr.next()
		if err != nil {
			if ctx.Err() != nil {
				return contract.ExecResult{}, ctx.Err()
			}
			return contract.ExecResult{}, contract.Errorf(contract.CodeDaemonConnectionLost, "the output of the command broke off: %v", err)
		}
		switch ev.name {
		case "error":
			return contract.ExecResult{}, streamError(ev)
		case "exit":
			var r contract.ExecResult
			if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
				return r, contract.Errorf(contract.CodeInternal, "the exit event does not decode: %v", err)
			}
			return r, nil
		case "output":
			var o contract.ExecOutput
			if err := json.Unmarshal([]byte(ev.data), &o); err != nil {
				return contract.ExecResult{}, contract.Errorf(contract.CodeInternal, "an output event does not decode: %v", err)
			}
			if output != nil {
				output(o)
			}
		}
	}
}

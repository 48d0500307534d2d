package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// leaseTTL outlives the run, so no lease expires unless the daemon loses
// its renewals.
const leaseTTL = int64(10 * time.Minute / time.Millisecond)

// unreachableBound is how long an agent tolerates not reaching the daemon
// before it says so: far beyond any restart.
const unreachableBound = 60 * time.Second

// refusals are the answers a lease request may honestly get in this run.
var refusals = map[contract.Code]bool{
	contract.CodeQueueTimeout: true, contract.CodeNoCapacity: true,
	contract.CodeCancelled: true, contract.CodeDaemonStopping: true,
}

// agent is one requester; step does one operation, or part of one that the
// next step retries after a lost connection.
type agent interface {
	step(ctx context.Context) error
	// holding reports whether the agent holds a lease: it then works on it
	// a while between operations, as a real agent does, so that kills find
	// leases held.
	holding() bool
}

// think is how long an agent holding a lease works between operations: up
// to 20 ms, at random.
func think(ctx context.Context, rng *rand.Rand) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(rng.IntN(20_000)) * time.Microsecond):
	}
}

// run steps a until ctx ends; failing to reach the daemon for
// unreachableBound is a violation, and ends the agent.
func run(ctx context.Context, name string, a agent, l *ledger, rng *rand.Rand) {
	var since time.Time
	for ctx.Err() == nil {
		err := a.step(ctx)
		if err == nil || ctx.Err() != nil {
			since = time.Time{}
			if a.holding() {
				think(ctx, rng)
			}
			continue
		}
		if since.IsZero() {
			since = time.Now()
		} else if time.Since(since) > unreachableBound {
			l.violate("%s could not reach the daemon for %s: %v", name, unreachableBound, err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond): // back off before redialling a daemon that is restarting
		}
	}
}

// lost reports whether err is the connection failing, not an answer.
func lost(err error) bool {
	var cerr *contract.Error
	return err != nil && (!errors.As(err, &cerr) || cerr.Code == contract.CodeDaemonConnectionLost)
}

func codeOf(err error) contract.Code {
	var cerr *contract.Error
	if errors.As(err, &cerr) {
		return cerr.Code
	}
	return ""
}

// sockAgent leases over the socket, as the CLI and MCP server do.
type sockAgent struct {
	name     string
	h        *home
	l        *ledger
	rng      *rand.Rand
	platform contract.Platform

	c       *client.Client
	lease   string
	key     string // the request being made, kept across a lost connection
	n       int
	retried bool // the release of lease was sent before a lost connection
}

func (a *sockAgent) holding() bool { return a.lease != "" }

func (a *sockAgent) step(ctx context.Context) error {
	if a.c == nil {
		c, err := a.h.dial(ctx, a.name, false)
		if err != nil {
			return err
		}
		a.c = c
	}
	err := a.op(ctx)
	if lost(err) {
		a.c.Close()
		a.c = nil
		return err
	}
	return nil
}

func (a *sockAgent) op(ctx context.Context) error {
	if a.lease == "" {
		if a.key == "" {
			a.n++
			a.key = fmt.Sprintf("%s-%d", a.name, a.n)
		}
		in := contract.LeaseRequestInput{Platform: a.platform, TimeoutMs: 2000, TTLMs: leaseTTL, IdempotencyKey: a.key}
		g, err := a.c.RequestLease(ctx, in, nil)
		if lost(err) || ctx.Err() != nil {
			return err
		}
		a.key = ""
		switch {
		case err == nil:
			a.l.granted(a.name, g.Lease.ID, g.Device.ID, g.Lease.TTLDeadline)
			a.lease = g.Lease.ID
		case refusals[codeOf(err)]:
			a.l.acked()
		default:
			a.l.violate("%s: lease request %s answered %v", a.name, in.IdempotencyKey, err)
		}
		return nil
	}
	if !a.retried && a.rng.IntN(10) < 8 {
		rec, err := a.c.Renew(ctx, a.lease, leaseTTL)
		switch {
		case lost(err) || ctx.Err() != nil:
			return err
		case err == nil:
			a.l.renewed(a.lease, rec.TTLDeadline)
		case codeOf(err) == contract.CodeUnknownLease:
			a.l.vanished(a.lease, "renew: "+err.Error())
			a.lease = ""
		default:
			a.l.violate("%s: renew of %s answered %v", a.name, a.lease, err)
		}
		return nil
	}
	a.l.releasing(a.lease)
	_, err := a.c.Release(ctx, a.lease)
	switch {
	case lost(err) || ctx.Err() != nil:
		a.retried = true
		return err
	case err == nil, a.retried && codeOf(err) == contract.CodeUnknownLease:
		// A retried release the daemon had already made answers that
		// the lease is unknown: released all the same.
		a.l.released(a.lease)
	case codeOf(err) == contract.CodeUnknownLease:
		a.l.vanished(a.lease, "release: "+err.Error())
	default:
		a.l.violate("%s: release of %s answered %v", a.name, a.lease, err)
	}
	a.lease, a.retried = "", false
	return nil
}

// httpAgent leases over the HTTP API with an agent token: requests are
// records it follows, and survive its connections.
type httpAgent struct {
	name, base, secret string
	l                  *ledger
	rng                *rand.Rand
	platform           contract.Platform
	hc                 *http.Client

	lease, request, key string
	n                   int
	retried             bool
}

// call does one HTTP request; a transport failure is returned as an error,
// an answer as its status and decoded body.
func (a *httpAgent) call(ctx context.Context, method, path, body string, headers ...string) (int, map[string]any, error) {
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.secret)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var out map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			return 0, nil, fmt.Errorf("%s %s answered %d with a body that is not JSON: %q", method, path, resp.StatusCode, b)
		}
	}
	if resp.StatusCode == http.StatusServiceUnavailable && errCode(out) == string(contract.CodeDaemonConnectionLost) {
		return 0, nil, fmt.Errorf("%s %s: %v", method, path, out)
	}
	return resp.StatusCode, out, nil
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func deadlineOf(lease map[string]any) int64 {
	s, _ := lease["expiresAt"].(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}

func (a *httpAgent) holding() bool { return a.lease != "" }

func (a *httpAgent) step(ctx context.Context) error {
	switch {
	case a.lease == "" && a.request == "":
		return a.create(ctx)
	case a.lease == "":
		return a.follow(ctx)
	case !a.retried && a.rng.IntN(10) < 8:
		status, body, err := a.call(ctx, "POST", "/v1/leases/"+a.lease+"/renew", fmt.Sprintf(`{"ttlMs":%d}`, leaseTTL))
		switch {
		case err != nil:
			return err
		case status == 200:
			a.l.renewed(a.lease, deadlineOf(body))
		case status == 404:
			a.l.vanished(a.lease, "HTTP renew: 404")
			a.lease = ""
		default:
			a.l.violate("%s: renew of %s answered %d %v", a.name, a.lease, status, body)
		}
		return nil
	}
	a.l.releasing(a.lease)
	status, body, err := a.call(ctx, "DELETE", "/v1/leases/"+a.lease, "")
	switch {
	case err != nil:
		a.retried = true
		return err
	case status == 202, a.retried && status == 404:
		a.l.released(a.lease)
	case status == 404:
		a.l.vanished(a.lease, "HTTP release: 404")
	default:
		a.l.violate("%s: release of %s answered %d %v", a.name, a.lease, status, body)
	}
	a.lease, a.retried = "", false
	return nil
}

func (a *httpAgent) create(ctx context.Context) error {
	if a.key == "" {
		a.n++
		a.key = fmt.Sprintf("%s-%d", a.name, a.n)
	}
	body := fmt.Sprintf(`{"platform":%q,"timeoutMs":2000,"ttlMs":%d}`, a.platform, leaseTTL)
	status, out, err := a.call(ctx, "POST", "/v1/lease-requests", body, "Idempotency-Key", a.key)
	switch {
	case err != nil:
		return err
	case status == 201:
		req, _ := out["request"].(map[string]any)
		a.request, _ = req["id"].(string)
		a.settled(req)
	case refusals[contract.Code(errCode(out))]:
		a.l.acked()
		a.key = ""
	default:
		a.l.violate("%s: lease request %s answered %d %v", a.name, a.key, status, out)
		a.key = ""
	}
	return nil
}

func (a *httpAgent) follow(ctx context.Context) error {
	status, out, err := a.call(ctx, "GET", "/v1/lease-requests/"+a.request+"?wait=5", "")
	switch {
	case err != nil:
		return err
	case status == 200:
		req, _ := out["request"].(map[string]any)
		a.settled(req)
	default:
		a.l.violate("%s: acknowledged request %s answered %d %v", a.name, a.request, status, out)
		a.request, a.key = "", ""
	}
	return nil
}

// settled takes a request's state: a grant, a refusal, or still waiting.
func (a *httpAgent) settled(req map[string]any) {
	switch req["state"] {
	case "granted":
		lease, _ := req["lease"].(map[string]any)
		id, _ := lease["id"].(string)
		dev, _ := lease["deviceId"].(string)
		a.l.granted(a.name, id, dev, deadlineOf(lease))
		a.lease, a.request, a.key = id, "", ""
	case "failed", "cancelled":
		e, _ := req["error"].(map[string]any)
		if c, _ := e["code"].(string); !refusals[contract.Code(c)] {
			a.l.violate("%s: request %s ended %v", a.name, a.request, req)
		}
		a.l.acked()
		a.request, a.key = "", ""
	}
}

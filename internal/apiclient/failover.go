package apiclient

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/simlock/simlock/internal/apiview"
	"github.com/simlock/simlock/internal/contract"
)

// Failover between a gateway's replicas. A client given several base URLs
// sends each call to the one in use and moves it on to the next, in turn,
// once around the list, when:
//
//   - the server could not be reached (no connection: refused, timed out,
//     a TLS handshake that failed): nothing reached any replica, so any
//     call may go on;
//   - the server answered 503 NOT_LEADER: a replica that does not lead
//     did nothing with the call;
//   - the connection broke after the call was sent, for a GET or a call
//     that carries an Idempotency-Key only: the server may have acted on
//     it, and only those are safe to send twice.
//
// The URL that answers becomes the one in use. A call whose body cannot be
// read again (a streamed upload) is not sent twice.

// do sends req to the base URL in use, and on to the next ones as the rules
// above allow; at is the index of the URL that answered, or was tried last.
func (c *Client) do(req *http.Request) (res *http.Response, at int, err error) {
	n := len(c.bases)
	start := int(c.cur.Load())
	for i := range n {
		at = (start + i) % n
		r := req
		if n > 1 {
			var rerr error
			if r, rerr = c.rebase(req, at, i > 0); r == nil {
				return nil, at, cmp.Or(err, rerr)
			}
		}
		var reached atomic.Bool
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { reached.Store(true) },
		}))
		res, sendErr := c.hc.Do(r)
		if sendErr != nil {
			if ctxErr := req.Context().Err(); ctxErr != nil {
				return nil, at, ctxErr
			}
			err = contract.Errorf(contract.CodeDaemonConnectionLost, "reach %s: %v", c.bases[at].Host, unwrapURL(sendErr))
			if !reached.Load() || resendable(req) {
				continue
			}
			return nil, at, err
		}
		if n > 1 && res.StatusCode == http.StatusServiceUnavailable {
			if nl := notLeader(res); nl != nil {
				err = nl
				continue
			}
		}
		c.cur.Store(int64(at))
		return res, at, nil
	}
	return nil, at, err
}

// rebase is req sent to c.bases[at]; a later attempt reads the body again.
// It returns nil (and err, the last attempt's error, as the call's) when
// the body cannot be read again.
func (c *Client) rebase(req *http.Request, at int, again bool) (*http.Request, error) {
	r := req.Clone(req.Context())
	b := c.bases[at]
	r.URL.Scheme, r.URL.Host, r.Host = b.Scheme, b.Host, ""
	if again && req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, contract.Errorf(contract.CodeDaemonConnectionLost, "reach %s: the call's body cannot be sent again to another server", req.URL.Host)
		}
		body, err := req.GetBody()
		if err != nil {
			return nil, contract.Errorf(contract.CodeDaemonConnectionLost, "read the call's body again: %v", err)
		}
		r.Body = body
	}
	return r, nil
}

// resendable reports whether req may reach a server twice: a read, or a
// call its idempotency key makes the server answer once.
func resendable(req *http.Request) bool {
	return req.Method == http.MethodGet || req.Method == http.MethodHead || req.Header.Get("Idempotency-Key") != ""
}

// notLeader is the NOT_LEADER error a 503 answer carries, or nil, leaving
// the answer readable for any other.
func notLeader(res *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(b))
	var eb apiview.ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error != nil && eb.Error.Code == contract.CodeNotLeader {
		return eb.Error
	}
	return nil
}

// leave moves the client off the base URL at, to the next one, when at is
// still the one in use: its stream broke, so the server behind it may be
// gone.
func (c *Client) leave(at int) {
	if n := len(c.bases); n > 1 {
		c.cur.CompareAndSwap(int64(at), int64((at+1)%n))
	}
}

// failoverTransport sends a request of another protocol (MCP) through the
// client's failover.
type failoverTransport struct{ c *Client }

func (t failoverTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, _, err := t.c.do(req)
	return res, err
}

package uplink

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/coder/websocket"

	"github.com/simlock/simlock/internal/contract"
)

// Accept upgrades a request to the uplink endpoint, which the caller has
// authenticated and whose headers it has checked. On failure the response
// has been written.
func Accept(w http.ResponseWriter, r *http.Request, opts Options) (*Conn, error) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil, fmt.Errorf("uplink: accept: %w", err)
	}
	c := NewConn(ws, opts)
	c.remote = addr(r.RemoteAddr)
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		c.local = a
	}
	return c, nil
}

// RefusedError is a gateway's refusal of an uplink, by HTTP status.
type RefusedError struct {
	Status int
	// Code and Message are those of the gateway's JSON error body, if it
	// sent one: the code says why, where the status alone cannot.
	Code    contract.Code
	Message string
}

func (e *RefusedError) Error() string {
	s := fmt.Sprintf("uplink: gateway refused: %d %s", e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Dial opens an uplink to the gateway at gatewayURL (http:// or https://,
// with any path the gateway is mounted under), as the worker workerID
// labelled label, authenticated by token. ctx bounds the handshake only.
func Dial(ctx context.Context, gatewayURL, token, workerID, label string, opts Options) (*Conn, error) {
	if err := CheckWorkerID(workerID); err != nil {
		return nil, fmt.Errorf("uplink: %w", err)
	}
	if err := CheckLabel(label); err != nil {
		return nil, fmt.Errorf("uplink: %w", err)
	}
	u, err := url.Parse(gatewayURL)
	if err != nil {
		return nil, fmt.Errorf("uplink: gateway URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("uplink: gateway URL %q: want http://host[:port] or https://host[:port]", u.Redacted())
	}
	u = u.JoinPath(Path)
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	h.Set(HeaderWorkerID, workerID)
	h.Set(HeaderWorkerLabel, label)
	ws, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, refused(resp)
		}
		return nil, fmt.Errorf("uplink: dial %s: %w", u.Redacted(), err)
	}
	c := NewConn(ws, opts)
	c.remote = addr(u.Host)
	return c, nil
}

// refused reads a refusal. Its body, if it is the JSON error body every
// simlock HTTP error has, gives the code and message.
func refused(resp *http.Response) *RefusedError {
	e := &RefusedError{Status: resp.StatusCode}
	if resp.Body == nil {
		return e
	}
	// The websocket library kept the first KiB of the body.
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Error *contract.Error `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error != nil {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	}
	return e
}

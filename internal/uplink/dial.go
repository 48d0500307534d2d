package uplink

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"

	"github.com/coder/websocket"

	"github.com/simlock/simlock/internal/contract"
)

// Accept upgrades a request to the uplink endpoint, which the caller has
// authenticated and whose headers it has checked. On failure the response
// has been written.
func Accept(w http.ResponseWriter, r *http.Request, opts Options) (*Conn, error) {
	hw := &hijacked{ResponseWriter: w}
	ws, err := websocket.Accept(hw, r, nil)
	if err != nil {
		return nil, fmt.Errorf("uplink: accept: %w", err)
	}
	c := newConn(ws, hw.sock, opts)
	c.remote = addr(r.RemoteAddr)
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		c.local = a
	}
	return c, nil
}

// hijacked keeps the socket the websocket takes over from the HTTP server.
type hijacked struct {
	http.ResponseWriter
	sock net.Conn
}

func (h *hijacked) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	sock, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	h.sock = sock
	return sock, brw, err
}

func (h *hijacked) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// dialed keeps the socket of one Dial, for its Conn to close when a peer
// does not answer its close.
type dialed struct {
	mu   sync.Mutex
	sock net.Conn
}

// client is an HTTP client like the default one, with a transport of its
// own that keeps the socket it dials (a fresh transport holds no idle
// socket, so the handshake runs on the last one dialed).
func (d *dialed) client() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	dial := t.DialContext
	t.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		sock, err := dial(ctx, network, address)
		if err == nil {
			d.mu.Lock()
			d.sock = sock
			d.mu.Unlock()
		}
		return sock, err
	}
	return &http.Client{Transport: t}
}

func (d *dialed) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sock.Close()
}

// RefusedError is a gateway's refusal of an uplink, by HTTP status.
type RefusedError struct {
	Status int
	// Code and Message are those of the gateway's JSON error body, if it
	// sent one: the code says why, where the status alone cannot.
	Code    contract.Code
	Message string
	// Details are the body's other fields: a replica that does not lead
	// names the leader in leaderUrl (contract.CodeNotLeader).
	Details map[string]any
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
	sock := &dialed{}
	ws, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPHeader: h, HTTPClient: sock.client()})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, refused(resp)
		}
		return nil, fmt.Errorf("uplink: dial %s: %w", u.Redacted(), err)
	}
	c := newConn(ws, sock, opts)
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
		e.Code, e.Message, e.Details = body.Error.Code, body.Error.Message, body.Error.Details
	}
	return e
}

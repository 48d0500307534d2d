// Package client is the typed Go client of the daemon protocol. The CLI, the
// MCP server, the gateway and the tests all talk to a daemon through it; none
// of them builds frames by hand.
//
// A Client is one session (one hello) over one connection. Its methods are
// safe for concurrent use: each call has its own request id, and responses
// and progress pushes are routed back to the call that made them.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/wire"
)

// Client is a session with a daemon.
type Client struct {
	conn  net.Conn
	w     *wire.Writer
	hello contract.HelloResult

	mu sync.Mutex
	// mu guards the fields below.
	next    int
	pending map[string]*call
	subs    map[string]chan contract.Event
	err     error // why the connection ended
	// stopping is why the daemon said it stops ("requested", "signal"),
	// or "" until it does.
	stopping string

	leaseLost chan contract.Inbound
	done      chan struct{}
}

type call struct {
	resp     chan contract.Inbound
	progress func(contract.LeaseProgress)
	output   func(contract.ExecOutput)
	started  func()
	job      func(contract.JobEvent)
	// onResult runs in the read loop before any later frame is routed, so
	// state it sets up (a subscription) sees every push that follows.
	onResult func(contract.Inbound)
}

// New starts a session over an open connection: it sends hello and checks
// the answer. The client owns conn from now on.
func New(ctx context.Context, conn net.Conn, hello contract.HelloInput) (*Client, error) {
	if hello.Protocol == (contract.VersionRange{}) {
		hello.Protocol = contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax}
	}
	c := &Client{
		conn: conn, w: wire.NewWriter(conn),
		pending: map[string]*call{}, subs: map[string]chan contract.Event{},
		leaseLost: make(chan contract.Inbound, 16), done: make(chan struct{}),
	}
	go c.readLoop()
	if err := c.Call(ctx, contract.OpHello, hello, &c.hello); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Dial connects to the daemon's unix socket and starts a session.
func Dial(ctx context.Context, socket string, hello contract.HelloInput) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, err
	}
	return New(ctx, conn, hello)
}

// Hello is the daemon's answer to this session's hello.
func (c *Client) Hello() contract.HelloResult { return c.hello }

// Close ends the session.
func (c *Client) Close() error { return c.conn.Close() }

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection ended, once Done is closed: nil for a plain
// close, else what the reader met (a bad frame, a read error).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// LeaseLost delivers the daemon's news that it ended a lease this session
// was granted (expired, killed, device lost).
func (c *Client) LeaseLost() <-chan contract.Inbound { return c.leaseLost }

// Stopping reports whether the daemon said it was stopping (and why:
// "requested" or "signal") before the connection ended: the end of the
// connection is then a stop, and a lease held across it is kept.
func (c *Client) Stopping() (reason string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopping, c.stopping != ""
}

// The notices LeaseLost also carries: a held lease's device crashed
// (device-unhealthy) or runs again (device-recovered); tell them apart by
// Push.

func (c *Client) readLoop() {
	r := wire.NewReader(c.conn, contract.MaxFrameLen*8)
	var err error
	for {
		var b []byte
		b, err = r.Next()
		if err != nil {
			break
		}
		if id, result, ok := splitResult(b); ok {
			c.route(contract.Inbound{Response: contract.Response{ID: id, Result: result}})
			continue
		}
		var in contract.Inbound
		if jerr := json.Unmarshal(b, &in); jerr != nil {
			// A push that breaks the contract's bounds (a progress step
			// with percent 101, say) is dropped; the calls go on.
			var loose struct {
				Push string `json:"push"`
			}
			if json.Unmarshal(b, &loose) == nil && loose.Push != "" {
				continue
			}
			err = fmt.Errorf("daemon sent a bad frame: %w", jerr)
			break
		}
		c.route(in)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	c.mu.Lock()
	c.err = err
	pending := c.pending
	c.pending = map[string]*call{}
	for id, ch := range c.subs {
		close(ch)
		delete(c.subs, id)
	}
	c.mu.Unlock()
	for _, p := range pending {
		close(p.resp)
	}
	close(c.done)
}

// splitResult recognises a result frame as the daemon writes it,
// {"id":"<digits>","result":<value>} (this client's ids are quoted
// numbers), and returns its id and value, slices of b, without scanning the
// value: the call that asked for it decodes it, once. Any other frame is
// decoded in full.
func splitResult(b []byte) (id, result json.RawMessage, ok bool) {
	const head, mid = `{"id":"`, `","result":`
	if !bytes.HasPrefix(b, []byte(head)) || b[len(b)-1] != '}' {
		return nil, nil, false
	}
	i := len(head)
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == len(head) || !bytes.HasPrefix(b[i:], []byte(mid)) {
		return nil, nil, false
	}
	start := i + len(mid)
	if start >= len(b)-1 {
		return nil, nil, false
	}
	return b[len(head)-1 : i+1], b[start : len(b)-1], true
}

func (c *Client) route(in contract.Inbound) {
	switch in.Push {
	case "":
		c.mu.Lock()
		p := c.pending[string(in.ID)]
		delete(c.pending, string(in.ID))
		c.mu.Unlock()
		if p != nil {
			if p.onResult != nil && in.Error == nil {
				p.onResult(in)
			}
			p.resp <- in
		}
	case contract.PushProgress:
		c.mu.Lock()
		p := c.pending[string(in.ID)]
		c.mu.Unlock()
		if p != nil && p.progress != nil && in.Progress != nil {
			p.progress(*in.Progress)
		}
	case contract.PushExecOutput:
		c.mu.Lock()
		p := c.pending[string(in.ID)]
		c.mu.Unlock()
		if p != nil && p.output != nil && in.Output != nil {
			p.output(*in.Output)
		}
	case contract.PushExecStarted:
		c.mu.Lock()
		p := c.pending[string(in.ID)]
		c.mu.Unlock()
		if p != nil && p.started != nil {
			p.started()
		}
	case contract.PushJob:
		c.mu.Lock()
		p := c.pending[string(in.ID)]
		c.mu.Unlock()
		if p != nil && p.job != nil && in.Job != nil {
			p.job(*in.Job)
		}
	case contract.PushEvent:
		c.mu.Lock()
		ch := c.subs[in.SubscriptionID]
		c.mu.Unlock()
		if ch != nil && in.Event != nil {
			ch <- *in.Event
		}
	case contract.PushDaemonStopping:
		// A claim from the wire: only the reasons the protocol names.
		reason := "requested"
		if in.Reason == "signal" {
			reason = "signal"
		}
		c.mu.Lock()
		c.stopping = reason
		c.mu.Unlock()
	case contract.PushLeaseLost, contract.PushDeviceUnhealthy, contract.PushDeviceRecovered:
		select {
		case c.leaseLost <- in:
		default:
		}
	}
}

// lostError is what a call sees when the connection ends under it.
func (c *Client) lostError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	msg := "the connection to the daemon was lost"
	if c.err != nil {
		msg += ": " + c.err.Error()
	}
	return contract.Errorf(contract.CodeDaemonConnectionLost, "%s", msg)
}

// Call runs one operation: it sends input, waits for the response, and
// decodes its result into result (which may be nil). A *json.RawMessage
// result receives the result's bytes as the daemon sent them, unchecked:
// decoding them checks them. A daemon error comes back as *contract.Error.
func (c *Client) Call(ctx context.Context, op contract.Op, input, result any) error {
	return c.call(ctx, op, input, result, &call{})
}

func (c *Client) call(ctx context.Context, op contract.Op, input, result any, p *call) error {
	raw, err := json.Marshal(input)
	if err != nil {
		return fmt.Errorf("encode %s input: %w", op, err)
	}
	p.resp = make(chan contract.Inbound, 1)
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return c.lostError()
	default:
	}
	c.next++
	id := strconv.Quote(strconv.Itoa(c.next))
	c.pending[id] = p
	c.mu.Unlock()
	if err := c.w.Write(contract.Request{ID: json.RawMessage(id), Op: op, Input: raw}); err != nil {
		c.forget(id)
		return contract.Errorf(contract.CodeDaemonConnectionLost, "send %s: %v", op, err)
	}
	select {
	case in, ok := <-p.resp:
		if !ok {
			return c.lostError()
		}
		if in.Error != nil {
			return in.Error
		}
		if raw, ok := result.(*json.RawMessage); ok {
			// Raw, as the daemon sent it: whoever decodes it checks it.
			*raw = in.Result
			return nil
		}
		if result != nil && len(in.Result) > 0 {
			if err := json.Unmarshal(in.Result, result); err != nil {
				return fmt.Errorf("decode %s result: %w", op, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.forget(id)
		if info, _ := contract.LookupOp(op); info.Cancellable {
			c.cancelCall(id)
		}
		return ctx.Err()
	}
}

// cancelCall tells the daemon that the call id's caller gave up on it
// (call.cancel), so what the call runs stops (a device.exec's command), as
// it would if the session ended. The answer is not waited for: it is
// routed to no call and dropped. The write runs on its own, so a caller
// whose context ended never waits on the connection. Only the operations
// that stop for it (contract.OpInfo.Cancellable) are cancelled: another
// call's end would change nothing on the daemon.
func (c *Client) cancelCall(id string) {
	c.mu.Lock()
	c.next++
	cancelID := strconv.Quote(strconv.Itoa(c.next))
	c.mu.Unlock()
	raw, _ := json.Marshal(contract.CallCancelInput{ID: json.RawMessage(id)})
	go func() {
		_ = c.w.Write(contract.Request{ID: json.RawMessage(cancelID), Op: contract.OpCallCancel, Input: raw})
	}()
}

func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

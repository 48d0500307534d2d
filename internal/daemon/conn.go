package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/wire"
)

// maxInFlight bounds the calls one session may have running at once.
const maxInFlight = 64

// outboxSize is how many frames may wait for a slow reader before the daemon
// drops the session rather than let it hold memory or block anyone.
const outboxSize = 1024

// conn is one client session.
type conn struct {
	d      *Daemon
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	out    chan []byte
	once   sync.Once
	// draining is set when the daemon stops: reading has stopped, and the
	// calls in flight still get to answer before the session closes.
	draining atomic.Bool

	mu sync.Mutex
	// mu guards the fields below.
	sess     *session // set by hello
	inFlight int
}

func newConn(d *Daemon, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{d: d, nc: nc, ctx: ctx, cancel: cancel, out: make(chan []byte, outboxSize)}
	go c.writeLoop()
	return c
}

// flushTimeout bounds how long a closing session may take to receive the
// frames already queued for it (the answer to daemon.stop among them).
const flushTimeout = 2 * time.Second

// close ends the session: reading stops at once, frames already queued are
// still written (bounded by flushTimeout), then the connection closes.
func (c *conn) close() {
	c.once.Do(func() {
		c.cancel()
		_ = c.nc.SetReadDeadline(time.Now())
	})
}

// drain stops reading new calls; the session stays open for answers.
func (c *conn) drain() {
	c.draining.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
}

// busy reports whether calls are still in flight.
func (c *conn) busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight > 0
}

// send queues a frame; a session too slow to take its frames is dropped.
func (c *conn) send(v any) {
	b, err := wire.Encode(v)
	if err != nil {
		c.d.log.Error("encode frame", "err", err)
		return
	}
	c.sendRaw(b)
}

func (c *conn) push(p contract.Push) { c.send(p) }

// sendRaw queues an encoded frame, as send does.
func (c *conn) sendRaw(b []byte) {
	select {
	case <-c.ctx.Done():
	case c.out <- b:
	default:
		c.d.log.Warn("dropping a session that does not read its frames")
		c.close()
	}
}

// encodeResult encodes a result once. A result that encodes itself (our
// own types: a status of thousands of records among them) is taken as it
// encodes, without encoding/json scanning its output again.
func encodeResult(result any) ([]byte, error) {
	if m, ok := result.(json.Marshaler); ok {
		return m.MarshalJSON()
	}
	return json.Marshal(result)
}

// resultFrame is the frame {"id":id,"result":raw} and its newline: what
// encoding a contract.Response would give, with raw (compact JSON from
// json.Marshal) copied once instead of parsed and copied again.
func resultFrame(id, raw json.RawMessage) []byte {
	b := make([]byte, 0, len(id)+len(raw)+len(`{"id":,"result":}`)+1)
	b = append(b, `{"id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, raw...)
	return append(b, "}\n"...)
}

func (c *conn) run() {
	defer c.d.dropConn(c)
	defer func() {
		// A draining session is closed by the daemon once its calls have
		// answered; any other end of reading ends the session now.
		if !c.draining.Load() {
			c.close()
		}
	}()
	r := wire.NewReader(c.nc, contract.MaxFrameLen)
	for {
		frame, err := r.Next()
		if errors.Is(err, wire.ErrFrameTooLarge) {
			c.send(contract.Response{ID: json.RawMessage("null"), Error: contract.Errorf(contract.CodeBadFrame,
				"frame larger than %d bytes", contract.MaxFrameLen).With("maxBytes", contract.MaxFrameLen)})
			continue
		}
		if err != nil {
			return
		}
		c.handle(frame)
	}
}

func (c *conn) writeLoop() {
	defer c.nc.Close()
	for {
		select {
		case <-c.ctx.Done():
			_ = c.nc.SetWriteDeadline(time.Now().Add(flushTimeout))
			for {
				select {
				case b := <-c.out:
					if _, err := c.nc.Write(b); err != nil {
						return
					}
				default:
					return
				}
			}
		case b := <-c.out:
			if _, err := c.nc.Write(b); err != nil {
				c.close()
				return
			}
		}
	}
}

// handle parses one frame and dispatches it. Every malformed frame gets a
// BAD_FRAME answer and the session goes on.
func (c *conn) handle(frame []byte) {
	var req contract.Request
	dec := json.NewDecoder(bytes.NewReader(frame))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		msg := "frame is not a JSON request object"
		if err != nil {
			msg += ": " + err.Error()
		}
		c.send(contract.Response{ID: idOf(frame), Error: contract.Errorf(contract.CodeBadFrame, "%s", msg)})
		return
	}
	if !validID(req.ID) {
		c.send(contract.Response{ID: json.RawMessage("null"), Error: contract.Errorf(contract.CodeBadFrame,
			"id must be a string of at most 128 characters or an integer")})
		return
	}
	if req.Op == "" {
		c.send(contract.Response{ID: req.ID, Error: contract.Errorf(contract.CodeBadFrame, "op is required")})
		return
	}
	c.mu.Lock()
	if c.inFlight >= maxInFlight {
		c.mu.Unlock()
		c.send(contract.Response{ID: req.ID, Error: contract.Errorf(contract.CodeBadRequest,
			"more than %d calls in flight on one connection", maxInFlight)})
		return
	}
	c.inFlight++
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			c.inFlight--
			c.mu.Unlock()
		}()
		result, err := c.dispatch(req)
		if err != nil {
			c.send(contract.Response{ID: req.ID, Error: contract.AsError(err)})
			return
		}
		raw, merr := encodeResult(result)
		if merr != nil {
			c.send(contract.Response{ID: req.ID, Error: contract.Errorf(contract.CodeInternal, "encode result: %v", merr)})
			return
		}
		// The result is encoded once: the frame is put together around it
		// rather than encoded again as a Response (a status of 10,000
		// leases is megabytes).
		c.sendRaw(resultFrame(req.ID, raw))
		if after, ok := result.(afterSend); ok {
			after.afterSend()
		}
	}()
}

// dispatch answers hello itself and hands every other call to the session
// hello opened.
func (c *conn) dispatch(req contract.Request) (any, error) {
	if req.Op == contract.OpHello {
		return c.doHello(req.Input)
	}
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	if s == nil {
		if _, known := contract.LookupOp(req.Op); !known {
			return nil, contract.Errorf(contract.CodeUnknownRequest, "unknown operation %q", clip(string(req.Op))).With("op", clip(string(req.Op)))
		}
		return nil, contract.Errorf(contract.CodeHandshakeRequired, "send hello before %s", req.Op)
	}
	return s.dispatch(req.ID, req.Op, req.Input)
}

func (c *conn) doHello(raw json.RawMessage) (any, error) {
	var in contract.HelloInput
	if err := contract.DecodeInput(raw, &in); err != nil {
		return nil, err
	}
	if in.Protocol.Max < contract.ProtocolMin || in.Protocol.Min > contract.ProtocolMax {
		return nil, contract.Errorf(contract.CodeProtocolVersionUnsupported,
			"client speaks protocol %d-%d, this daemon %d-%d", in.Protocol.Min, in.Protocol.Max, contract.ProtocolMin, contract.ProtocolMax).
			With("client", in.Protocol).
			With("daemon", contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax}).
			With("daemonVersion", c.d.opts.Version)
	}
	role := contract.RoleAgent
	if in.AdminToken != "" {
		if !c.d.checkAdmin(in.AdminToken) {
			return nil, contract.Errorf(contract.CodeAdminAuthenticationFailed, "the admin token does not match this daemon's")
		}
		role = contract.RoleAdmin
	}
	principal := in.Principal
	if principal == "" {
		principal = "anonymous-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil {
		return nil, contract.Errorf(contract.CodeBadRequest, "hello was already sent on this connection")
	}
	c.sess = newSession(c.d, c.ctx, role, principal, c.push, c.close)
	return contract.HelloResult{
		Protocol:      min(in.Protocol.Max, contract.ProtocolMax),
		Daemon:        contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		DaemonVersion: c.d.opts.Version,
		Role:          role,
		Principal:     principal,
	}, nil
}

// afterSend is a result with work to do once its response is queued (an
// event subscription starts pushing only after its answer).
type afterSend interface{ afterSend() }

// idOf recovers the id of a frame that failed strict parsing, so the client
// can match the error to its call.
func idOf(frame []byte) json.RawMessage {
	var loose struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(frame, &loose) == nil && validID(loose.ID) {
		return loose.ID
	}
	return json.RawMessage("null")
}

func validID(id json.RawMessage) bool {
	if len(id) == 0 || len(id) > 130 {
		return false
	}
	var s string
	if json.Unmarshal(id, &s) == nil {
		return true
	}
	_, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil
}

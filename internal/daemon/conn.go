package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/wire"
)

// maxInFlight bounds the calls one session may have running at once.
const maxInFlight = 64

// outboxSize and outboxBytes bound the frames that may wait for a slow
// reader (a frame alone may be larger) before the daemon drops the session
// rather than let it hold memory or block anyone.
const (
	outboxSize  = 1024
	outboxBytes = 16 << 20
)

// conn is one client session.
type conn struct {
	d      *Daemon
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	// kick wakes the writer goroutine: frames wait that nobody is writing.
	kick chan struct{}
	// draining is set when the daemon stops: reading has stopped, and the
	// calls in flight still get to answer before the session closes.
	draining atomic.Bool
	// trusted is an uplink to the gateway this worker's config names: its
	// session is admin without the admin token, which the gateway does not
	// have.
	trusted bool
	// as, when set, is the token an in-process session acts as (an MCP
	// session of /mcp): its hello gets the token's role and principal,
	// confined as remote, whatever the hello says.
	as *contract.TokenRecord

	wmu sync.Mutex
	// wmu guards the outbox. One goroutine at a time writes it out (the
	// writer): a call answering when nothing is being written writes its
	// answer itself, with no hand-off; pushes, sent from under the engine's
	// lock, never write and wake the writer goroutine instead.
	outbox  [][]byte
	queued  int // bytes in outbox
	writing bool
	// closing: the session ended; the writer closes the connection once
	// the outbox is empty, and frames after that are dropped.
	closing bool
	// broken: a write failed, or the session was dropped for not
	// reading; every frame after it is dropped.
	broken bool

	mu sync.Mutex
	// mu guards the fields below.
	sess     *session // set by hello
	inFlight int
	// calls are the calls in flight, by their id as the frame gave it, so
	// call.cancel can end one.
	calls map[string]*inflight
}

// inflight is one call in flight: cancel ends its context.
type inflight struct{ cancel context.CancelFunc }

func newConn(d *Daemon, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{d: d, nc: nc, ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1)}
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
		_ = c.nc.SetWriteDeadline(time.Now().Add(flushTimeout))
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

// send queues a frame for the writer goroutine; it never blocks. A session
// too slow to take its frames is dropped.
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
	if c.enqueue(b) {
		// The writer goroutine takes the writer's part; a wake-up already
		// pending does as well.
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// answer writes a call's answer: at once, from the calling goroutine, when
// nothing else is being written; else after the frames queued before it.
func (c *conn) answer(b []byte) {
	if c.enqueue(b) {
		c.flush()
	}
}

// enqueue adds b to the outbox and reports whether the caller is now the
// writer, who must flush.
func (c *conn) enqueue(b []byte) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.broken || (c.closing && !c.writing) {
		return false // the connection is closed, or cannot be written
	}
	if len(c.outbox) >= outboxSize || (len(c.outbox) > 0 && c.queued+len(b) > outboxBytes) {
		// It reads nothing: what waits for it is dropped now, and the
		// connection closed at once, which also ends a write blocked on
		// it (close's write deadline would keep it for flushTimeout).
		c.d.log.Warn("dropping a session that does not read its frames", "frames", len(c.outbox), "bytes", c.queued)
		c.outbox, c.queued, c.closing, c.broken = nil, 0, true, true
		c.close()
		_ = c.nc.Close()
		c.d.freedSessionMemory()
		return false
	}
	c.outbox = append(c.outbox, b)
	c.queued += len(b)
	if c.writing {
		return false
	}
	c.writing = true
	return true
}

// flush writes the outbox until it is empty, as the writer, and closes the
// connection then if the session has ended. A failed write closes the
// session and drops what is left.
func (c *conn) flush() {
	for {
		c.wmu.Lock()
		if len(c.outbox) == 0 {
			c.writing = false
			closing := c.closing
			c.wmu.Unlock()
			if closing {
				c.nc.Close()
			}
			return
		}
		b := c.outbox[0]
		c.outbox[0] = nil
		c.outbox = c.outbox[1:]
		c.queued -= len(b)
		c.wmu.Unlock()
		if _, err := c.nc.Write(b); err != nil {
			// Nothing more can be written: the peer is gone (or too slow
			// for a closing session's deadline). What it sent before it
			// went is still read and carried out, its answers dropped;
			// run ends the session at the end of the stream.
			c.wmu.Lock()
			c.outbox, c.queued, c.writing, c.broken = nil, 0, false, true
			closing := c.closing
			c.wmu.Unlock()
			if closing {
				// The session has ended already (no more reading): this
				// writer was the one to close the connection.
				_ = c.nc.Close()
			}
			return
		}
	}
}

// resultAppender is a result that appends its own encoding (a status of
// thousands of records), so it is encoded once, straight into the frame.
type resultAppender interface {
	appendResult(b []byte) ([]byte, error)
}

// resultFrame is the frame {"id":id,"result":<result>} and its newline: what
// encoding a contract.Response would give, put together around the result
// rather than encoding the result and then the Response again (which would
// scan and copy the result twice more). A result that encodes itself (our
// own types) is taken as it encodes.
func resultFrame(id json.RawMessage, result any) ([]byte, error) {
	b := make([]byte, 0, 256)
	b = append(b, `{"id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	var err error
	switch r := result.(type) {
	case resultAppender:
		b, err = r.appendResult(b)
	case json.Marshaler:
		var raw []byte
		raw, err = r.MarshalJSON()
		b = append(b, raw...)
	default:
		var raw []byte
		raw, err = json.Marshal(result)
		b = append(b, raw...)
	}
	if err != nil {
		return nil, err
	}
	return append(b, "}\n"...), nil
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

// writeLoop writes queued pushes. Once the session closes, the frames
// already queued still go out (bounded by close's write deadline), then the
// connection closes: here, or by the writer at work when it is done.
func (c *conn) writeLoop() {
	for {
		select {
		case <-c.kick:
			c.flush()
		case <-c.ctx.Done():
			c.wmu.Lock()
			c.closing = true
			busy := c.writing
			c.writing = true
			c.wmu.Unlock()
			// A wake-up still pending means the writer's part was handed to
			// this goroutine: nobody else is writing.
			select {
			case <-c.kick:
				busy = false
			default:
			}
			if !busy {
				c.flush()
			}
			return
		}
	}
}

// handle parses one frame and dispatches it. Every malformed frame gets a
// BAD_FRAME answer and the session goes on.
// decodeFrame reads one request frame strictly: exact field names, no
// duplicates, no unknown fields, nothing after the object, an id that can be
// echoed and an op. A frame it refuses comes back as the answer to send:
// BAD_FRAME, with the frame's id when it has a usable one.
func decodeFrame(frame []byte) (contract.Request, *contract.Response) {
	var req contract.Request
	if err := contract.CheckKeys(frame, reflect.TypeOf(req)); err != nil {
		return req, &contract.Response{ID: idOf(frame), Error: contract.Errorf(contract.CodeBadFrame, "%v", err)}
	}
	dec := json.NewDecoder(bytes.NewReader(frame))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		msg := "frame is not a JSON request object"
		if err != nil {
			msg += ": " + err.Error()
		}
		return req, &contract.Response{ID: idOf(frame), Error: contract.Errorf(contract.CodeBadFrame, "%s", msg)}
	}
	if !validID(req.ID) {
		return req, &contract.Response{ID: json.RawMessage("null"), Error: contract.Errorf(contract.CodeBadFrame,
			"id is required: a string (valid UTF-8, at most 128 characters) or an integer")}
	}
	if req.Op == "" {
		return req, &contract.Response{ID: req.ID, Error: contract.Errorf(contract.CodeBadFrame, "op is required")}
	}
	return req, nil
}

func (c *conn) handle(frame []byte) {
	req, refused := decodeFrame(frame)
	if refused != nil {
		c.send(*refused)
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
	// Each call has its own context, under the session's: call.cancel
	// ends it alone. A second call reusing an id in flight takes the
	// entry; the first then runs to its end uncancellable by id.
	ctx, cancel := context.WithCancel(c.ctx)
	me := &inflight{cancel: cancel}
	key := string(req.ID)
	if c.calls == nil {
		c.calls = map[string]*inflight{}
	}
	c.calls[key] = me
	c.mu.Unlock()
	call := func() {
		defer func() {
			c.mu.Lock()
			c.inFlight--
			if c.calls[key] == me {
				delete(c.calls, key)
			}
			c.mu.Unlock()
			cancel()
		}()
		result, err := c.dispatch(ctx, req)
		if err != nil {
			c.send(contract.Response{ID: req.ID, Error: contract.AsError(err)})
			return
		}
		frame, merr := resultFrame(req.ID, result)
		if merr != nil {
			c.send(contract.Response{ID: req.ID, Error: contract.Errorf(contract.CodeInternal, "encode result: %v", merr)})
			return
		}
		c.answer(frame)
		if after, ok := result.(afterSend); ok {
			after.afterSend()
		}
	}
	if inline[req.Op] {
		call()
		return
	}
	go call()
}

// inline are the operations that wait on nothing but the decision lock: the
// reading goroutine runs them itself, with no hand-off to another, and reads
// the session's next frame once they have answered. Any other call runs in
// a goroutine of its own, so a lease request waiting in line does not hold
// up its session's renewals.
var inline = map[contract.Op]bool{
	contract.OpHello: true, contract.OpLeaseRenew: true, contract.OpLeaseRelease: true,
	contract.OpLeaseGet: true, contract.OpLeaseList: true, contract.OpLeaseCancel: true,
	contract.OpCallCancel: true, contract.OpPing: true,
}

// dispatch answers hello and call.cancel itself and hands every other call
// to the session hello opened, with the call's own context.
func (c *conn) dispatch(ctx context.Context, req contract.Request) (any, error) {
	if req.Op == contract.OpHello {
		return c.doHello(req.Input)
	}
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	if s == nil {
		if _, known := contract.LookupOp(req.Op); !known {
			return nil, contract.Errorf(contract.CodeUnknownRequest, "unknown operation %q", contract.Clip(string(req.Op))).With("op", contract.Clip(string(req.Op)))
		}
		return nil, contract.Errorf(contract.CodeHandshakeRequired, "send hello before %s", req.Op)
	}
	if req.Op == contract.OpCallCancel {
		return c.cancelCall(req.Input)
	}
	return s.dispatch(ctx, req.ID, req.Op, req.Input)
}

// cancelCall answers call.cancel: it ends the context of the session's call
// in flight with that id, if there is one. Only this connection's calls can
// be named, so a session cancels nobody else's.
func (c *conn) cancelCall(raw json.RawMessage) (any, error) {
	var in contract.CallCancelInput
	if err := contract.DecodeInput(raw, &in); err != nil {
		return nil, err
	}
	c.mu.Lock()
	f, ok := c.calls[string(in.ID)]
	c.mu.Unlock()
	if ok {
		f.cancel()
	}
	return contract.CallCancelResult{Cancelled: ok}, nil
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
	if c.as != nil {
		return c.helloAs(in)
	}
	role := contract.RoleAgent
	if c.trusted {
		role = contract.RoleAdmin
	} else if in.AdminToken != "" {
		if !c.d.checkAdmin(in.AdminToken) {
			return nil, contract.Errorf(contract.CodeAdminAuthenticationFailed, "the admin token does not match this daemon's")
		}
		role = contract.RoleAdmin
	}
	if err := reservedPrincipal(c.trusted, in.Principal); err != nil {
		return nil, err
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
	c.sess.gateway = c.trusted
	// A gateway's callers are remote, whatever its hello says; any other
	// session may confine itself, never widen what it gets.
	c.sess.remote = c.trusted || in.Remote
	return contract.HelloResult{
		Protocol:      min(in.Protocol.Max, contract.ProtocolMax),
		Daemon:        contract.VersionRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax},
		DaemonVersion: c.d.opts.Version,
		Role:          role,
		Principal:     principal,
		Remote:        c.sess.remote,
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

// validID reports whether id may be echoed in an answer: a JSON string of
// valid UTF-8 (the answer must be JSON, and the id is written back as it
// came) or an integer. A missing or null id is not an id.
func validID(id json.RawMessage) bool {
	if len(id) == 0 || len(id) > 130 {
		return false
	}
	if id[0] == '"' {
		var s string
		return utf8.Valid(id) && json.Unmarshal(id, &s) == nil
	}
	_, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil
}

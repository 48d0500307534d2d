package uplink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// Conn is a net.Conn over a WebSocket that carries one protocol frame per
// text message.
//
// Read yields each message followed by '\n', so a wire.Reader sees one line
// per frame. Write sends each '\n'-terminated line as one message, without
// the '\n'; a Write may carry several lines or part of one (the rest of a
// line waits for the Write that ends it). A binary message, a message that
// holds a raw '\n' (it would read as two frames), or one over MaxFrame ends
// the Conn with a close status and a reason, which Read returns.
//
// Deadlines work as net.Conn documents: past one, a Read or Write fails with
// an error that is os.ErrDeadlineExceeded and a net.Error whose Timeout is
// true, and a deadline set in the past interrupts the Read or Write under
// way. A Read that times out leaves the Conn as it was (the daemon stops
// reading a session that still has answers to write). A Write that fails,
// or reaches its deadline once it has begun, ends it: the stream cannot go
// on after a message cut short.
//
// A goroutine reads ahead of Read, one message at a time, and answers the
// peer's pings meanwhile; so the peer sees this end alive as long as Read
// keeps taking frames, and a reader stuck for three heartbeats is taken for
// dead, as it should be. Another goroutine pings the peer every Heartbeat and
// ends the Conn, with status policy violation and the reason "heartbeat: peer
// silent", once three pings in a row went unanswered.
//
// Close does not wait for the close handshake, which a dead peer would hold
// for seconds: it ends reads and writes at once, and Done is closed when the
// handshake is over and every goroutine of the Conn has returned. A peer
// that does not answer the close is given one heartbeat (two seconds at
// most); past it the socket beneath the websocket is closed, whichever
// goroutine is reading it then (the websocket's own handshake reader, with
// a bound of five seconds, takes over the read whenever the Conn is between
// two messages).
type Conn struct {
	ws *websocket.Conn
	// sock is the socket beneath ws: closing it ends every read and write
	// of ws at once, whoever is waiting.
	sock          io.Closer
	opts          Options
	local, remote net.Addr

	// life is cancelled once the Conn is closing and the grace for the
	// close handshake is over, or at once when a write's deadline passes.
	// The websocket drops a socket whose read or write context ends: that
	// is how a handshake the peer does not answer is cut short, and how a
	// write blocked on a peer that reads nothing ends.
	life context.Context
	kill context.CancelFunc

	// msgs hands the message read ahead, its '\n' added, to Read.
	msgs     chan []byte
	rdl, wdl *deadline

	rmu sync.Mutex
	// rmu guards rest, and so serves Reads one at a time.
	rest []byte // what Read has not yet returned of the current message

	// wlock is held by the Write under way: a channel, so that a deadline
	// or Close ends a Write waiting for another.
	wlock chan struct{}
	// wlock guards partial.
	partial []byte // a line whose '\n' has not been written yet

	once sync.Once
	// closed is closed when the Conn ends; err and byUser are set before,
	// and read only after it is.
	closed chan struct{}
	err    error // why it ended, as Read returns it
	byUser bool  // Close or CloseWith ended it
	done   chan struct{}
	wg     sync.WaitGroup // the read loop and the heartbeat
}

var _ net.Conn = (*Conn)(nil)

// network names the Conn's addresses and errors.
const network = "websocket"

type addr string

func (a addr) Network() string { return network }
func (a addr) String() string  { return string(a) }

// newConn runs the uplink framing over ws, which the Conn owns from now on,
// and sock, the socket beneath it.
func newConn(ws *websocket.Conn, sock io.Closer, opts Options) *Conn {
	opts = opts.withDefaults()
	// The limit lets one byte past MaxFrame through, so the read loop
	// refuses an oversized message itself, with a reason of its own.
	ws.SetReadLimit(opts.MaxFrame)
	life, kill := context.WithCancel(context.Background())
	c := &Conn{
		ws: ws, sock: sock, opts: opts, local: addr("unknown"), remote: addr("unknown"),
		life: life, kill: kill,
		msgs: make(chan []byte),
		rdl:  newDeadline(context.Background()), wdl: newDeadline(life),
		wlock:  make(chan struct{}, 1),
		closed: make(chan struct{}), done: make(chan struct{}),
	}
	c.wg.Add(2)
	go c.readLoop()
	go c.heartbeat()
	return c
}

// Read reads the frames the peer sends, each followed by '\n'.
func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if len(c.rest) == 0 || c.closedByUser() {
		if err := c.nextMessage(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	if len(c.rest) == 0 {
		c.rest = nil
	}
	return n, nil
}

// nextMessage waits for the read loop's next message.
func (c *Conn) nextMessage() error {
	select {
	case <-c.closed:
		return c.readErr()
	default:
	}
	ctx := c.rdl.context()
	if ctx.Err() != nil {
		return c.timeout("read")
	}
	select {
	case m := <-c.msgs:
		c.rest = m
		return nil
	case <-c.closed:
		return c.readErr()
	case <-ctx.Done():
		return c.timeout("read")
	}
}

func (c *Conn) closedByUser() bool {
	select {
	case <-c.closed:
		return c.byUser
	default:
		return false
	}
}

// readErr is what Read returns once the Conn has ended.
func (c *Conn) readErr() error {
	if c.byUser {
		return c.opError("read", net.ErrClosed)
	}
	return c.err
}

// errPeerClosed is what a Write returns after the peer closed normally.
var errPeerClosed = errors.New("uplink: closed by peer")

// writeErr is what Write returns once the Conn has ended.
func (c *Conn) writeErr() error {
	switch {
	case c.byUser:
		return c.opError("write", net.ErrClosed)
	case c.err == io.EOF:
		return c.opError("write", errPeerClosed)
	}
	return c.opError("write", c.err)
}

func (c *Conn) timeout(op string) error { return c.opError(op, os.ErrDeadlineExceeded) }

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: network, Source: c.local, Addr: c.remote, Err: err}
}

// Write sends each '\n'-terminated line of p as one text message.
func (c *Conn) Write(p []byte) (int, error) {
	ctx := c.wdl.context()
	if err := c.lockWrite(ctx); err != nil {
		return 0, err
	}
	defer func() { <-c.wlock }()
	// The websocket is given life, not the deadline: were it given the
	// deadline, it would drop the socket at once when it passed, and the
	// reader could see that before the Conn had recorded why.
	stop := context.AfterFunc(ctx, func() {
		if expired(ctx) {
			c.refuse(websocket.StatusPolicyViolation, "write timed out")
			c.kill()
		}
	})
	defer stop()
	n := 0
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.partial = append(c.partial, p...)
			return n + len(p), nil
		}
		line := p[:i]
		if len(c.partial) > 0 {
			line = append(c.partial, line...)
		}
		if err := c.ws.Write(c.life, websocket.MessageText, line); err != nil {
			return n, c.writeFailed(ctx, err)
		}
		c.partial = nil
		n += i + 1
		p = p[i+1:]
	}
	return n, nil
}

// lockWrite waits for the Write under way, if any, to finish.
func (c *Conn) lockWrite(ctx context.Context) error {
	select {
	case <-c.closed:
		return c.writeErr()
	default:
	}
	if ctx.Err() != nil {
		return c.ctxErr("write", ctx)
	}
	select {
	case c.wlock <- struct{}{}:
	case <-c.closed:
		return c.writeErr()
	case <-ctx.Done():
		return c.ctxErr("write", ctx)
	}
	select {
	case <-c.closed:
		<-c.wlock
		return c.writeErr()
	default:
		return nil
	}
}

// ctxErr is the error for an operation whose context ended: a timeout, or
// the end of the Conn.
func (c *Conn) ctxErr(op string, ctx context.Context) error {
	if expired(ctx) {
		return c.timeout(op)
	}
	<-c.closed // life ends only after closed
	if op == "read" {
		return c.readErr()
	}
	return c.writeErr()
}

// writeFailed says why a write failed, and ends the Conn if nothing else
// has: the rest of the stream cannot follow a message cut short.
func (c *Conn) writeFailed(ctx context.Context, err error) error {
	if expired(ctx) {
		return c.timeout("write") // and the deadline ended the Conn
	}
	select {
	case <-c.closed:
		return c.writeErr()
	default:
	}
	if errors.Is(err, net.ErrClosed) {
		// The socket closed under the write: the peer closed it or it
		// broke, and the read loop, about to see that, says which.
		return c.opError("write", err)
	}
	err = fmt.Errorf("uplink: write: %w", err)
	c.end(websocket.StatusInternalError, "write failed", err, false)
	return c.opError("write", err)
}

// Close closes the Conn with the normal status. It is idempotent.
func (c *Conn) Close() error { return c.CloseWith(websocket.StatusNormalClosure, "") }

// CloseWith closes the Conn with code and reason, which the peer's Read
// reports (a reason is cut to the 123 bytes a close frame holds). Only the
// first close of a Conn says why; later ones do nothing.
func (c *Conn) CloseWith(code websocket.StatusCode, reason string) error {
	c.end(code, clipReason(reason), nil, true)
	return nil
}

// Done is closed once the Conn is closed, its close handshake over, and its
// goroutines returned.
func (c *Conn) Done() <-chan struct{} { return c.done }

// LocalAddr and RemoteAddr are the socket's addresses as far as Accept or
// Dial knew them; a Conn made by NewConn knows neither.
func (c *Conn) LocalAddr() net.Addr  { return c.local }
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

func (c *Conn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

func (c *Conn) SetReadDeadline(t time.Time) error {
	c.rdl.set(t)
	return nil
}

func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wdl.set(t)
	return nil
}

// refuse ends the Conn for a peer that broke the protocol, telling it why.
func (c *Conn) refuse(code websocket.StatusCode, reason string) {
	c.end(code, reason, fmt.Errorf("uplink: closed: %w", websocket.CloseError{Code: code, Reason: reason}), false)
}

// end ends the Conn once, for the first reason given: reads and writes fail
// from now on, and the close handshake runs in the background.
func (c *Conn) end(code websocket.StatusCode, reason string, err error, byUser bool) {
	c.once.Do(func() {
		c.err, c.byUser = err, byUser
		close(c.closed)
		go c.shutdown(code, reason)
	})
}

func (c *Conn) shutdown(code websocket.StatusCode, reason string) {
	defer close(c.done)
	force := time.AfterFunc(c.opts.closeGrace(), c.drop)
	_ = c.ws.Close(code, reason)
	force.Stop()
	c.drop()
	c.wg.Wait()
}

// drop ends the websocket without waiting any longer for the peer.
// Cancelling life is enough while the read loop is reading the socket; the
// socket is closed too, for the websocket's handshake reader may hold the
// read instead, under a context of its own.
func (c *Conn) drop() {
	c.kill()
	_ = c.sock.Close()
}

// readLoop reads messages ahead of Read, one at a time, and so answers the
// peer's pings and pongs between them. Once the Conn is closing it goes on
// reading, discarding messages, until the peer's close frame comes: while
// it reads, cancelling life can cut the handshake short.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	for {
		typ, r, err := c.ws.Reader(c.life)
		if err != nil {
			// The socket is down already (the peer closed it or it
			// broke), so the status given here reaches nobody.
			c.end(websocket.StatusNormalClosure, "", readError(err), false)
			return
		}
		select {
		case <-c.closed:
			if _, err := io.Copy(io.Discard, r); err != nil {
				return
			}
			continue
		default:
		}
		if typ != websocket.MessageText {
			c.refuse(websocket.StatusUnsupportedData, "binary message: frames are text")
			return
		}
		b, err := io.ReadAll(io.LimitReader(r, c.opts.MaxFrame+1))
		if err != nil {
			c.end(websocket.StatusNormalClosure, "", readError(err), false)
			return
		}
		if int64(len(b)) > c.opts.MaxFrame {
			c.refuse(websocket.StatusMessageTooBig, fmt.Sprintf("message over %d bytes", c.opts.MaxFrame))
			return
		}
		if bytes.IndexByte(b, '\n') >= 0 {
			c.refuse(websocket.StatusPolicyViolation, "message holds a newline: one frame per message")
			return
		}
		select {
		case c.msgs <- append(b, '\n'):
		case <-c.closed:
		}
	}
}

// readError says why reading the socket failed: the peer's normal close is
// the end of the stream, as on any net.Conn.
func readError(err error) error {
	var ce websocket.CloseError
	switch {
	case !errors.As(err, &ce):
		return fmt.Errorf("uplink: read: %w", err)
	case ce.Code == websocket.StatusNormalClosure:
		return io.EOF
	}
	return fmt.Errorf("uplink: closed by peer: %w", ce)
}

// heartbeat pings the peer every Heartbeat, each ping given until the next
// is due, and ends the Conn once missedPings in a row went unanswered.
func (c *Conn) heartbeat() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.Heartbeat)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(c.life, c.opts.Heartbeat)
		rtt, err := c.Ping(ctx)
		cancel()
		switch {
		case err == nil:
			missed = 0
			if c.opts.OnRTT != nil {
				c.opts.OnRTT(rtt)
			}
		case errors.Is(err, net.ErrClosed) || c.life.Err() != nil:
			return // the socket is down: the read loop says why
		default:
			missed++
			if missed == missedPings {
				c.refuse(websocket.StatusPolicyViolation, "heartbeat: peer silent")
				return
			}
		}
	}
}

// Ping sends the peer a WebSocket ping and returns how long its pong took:
// the transport's own round trip, answered by the peer's reader before any
// message of the protocol over it. It fails when ctx ends first or the
// Conn is closed.
func (c *Conn) Ping(ctx context.Context) (time.Duration, error) {
	sent := time.Now()
	if err := c.ws.Ping(ctx); err != nil {
		return 0, err
	}
	return time.Since(sent), nil
}

// maxReason is what a close frame holds of a reason, in bytes.
const maxReason = 123

func clipReason(s string) string {
	if len(s) <= maxReason {
		return s
	}
	s = s[:maxReason]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// bodyPolicy is how a route takes its request body. Every request has one,
// its route's or, for the routes registered without one (and the requests
// no route matches), the server's default: MaxBody bytes, whole within
// BodyTimeout. The policy is applied in ServeHTTP before anything else,
// authentication included, so no route can leave a body unbounded.
type bodyPolicy struct {
	// max bounds the body in bytes: a declared Content-Length over it is
	// BODY_TOO_LARGE before a byte is read, and so is a body that turns
	// out longer.
	max int64
	// whole bounds the arrival of the whole body, read before the handler
	// runs: past it, BODY_TIMEOUT. Not for streamed routes.
	whole time.Duration
	// streamed routes read their body themselves, as it arrives (an
	// upload): each read must make progress within idle.
	streamed bool
	idle     time.Duration
}

// defaultBody is the policy of a route registered with handle.
func (s *Server) defaultBody() bodyPolicy {
	return bodyPolicy{max: s.maxBody, whole: s.bodyTimeout}
}

// bodyTooLarge is the answer to a body over a policy's max.
func bodyTooLarge(max int64) *contract.Error {
	return contract.Errorf(contract.CodeBodyTooLarge, "the request body is larger than %d bytes", max).With("maxBytes", max)
}

// takeBody applies pol to r's body. For a route that is not streamed it
// reads the body whole, within pol.whole, and puts it back in memory for
// the handler; for a streamed one it wraps the body in a streamBody. A
// body refused here (too large, too slow, unreadable) is answered at once,
// the connection closed after the answer, and takeBody reports false.
func (s *Server) takeBody(w http.ResponseWriter, r *http.Request, pol bodyPolicy) bool {
	if r.ContentLength > pol.max {
		s.refuseBody(w, r, bodyTooLarge(pol.max))
		return false
	}
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	rc := http.NewResponseController(w)
	if pol.streamed {
		// Until the handler reads, a read by net/http itself (what it
		// drains of a body left unread) has the same bound.
		_ = rc.SetReadDeadline(time.Now().Add(pol.idle))
		r.Body = &streamBody{body: http.MaxBytesReader(w, r.Body, pol.max), w: w, rc: rc, max: pol.max, idle: pol.idle}
		return true
	}
	// A body that trickles in holds a connection and a goroutine: it has
	// pol.whole to arrive whole. Read through MaxBytesReader, a body found
	// too large tells net/http so, which then lets the client read the
	// answer before the connection closes.
	_ = rc.SetReadDeadline(time.Now().Add(pol.whole))
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, pol.max))
	if err != nil {
		s.refuseBody(w, r, unreadBody(err, pol))
		return false
	}
	// Whole: a stream the handler opens next must not be cut by it.
	_ = rc.SetReadDeadline(time.Time{})
	r.Body = io.NopCloser(bytes.NewReader(raw))
	return true
}

// unreadBody is the error for a body read that failed: BODY_TOO_LARGE
// past its max, BODY_TIMEOUT past its bound, BAD_REQUEST for anything else
// (a broken chunked encoding).
func unreadBody(err error, pol bodyPolicy) *contract.Error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return bodyTooLarge(pol.max)
	}
	bound := pol.whole
	if pol.streamed {
		bound = pol.idle
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return contract.Errorf(contract.CodeBodyTimeout, "the request body did not arrive within %s", bound).
			With("timeoutMs", bound.Milliseconds())
	}
	return contract.BadRequest("", "could not read the request body: %v", err)
}

// refuseBody answers a request whose body was refused, then closes its
// connection: the rest of the body is never read, neither by the handler
// nor by net/http, which would otherwise read up to 256 KiB of what is
// left to keep the connection, for as long as the client takes to send it.
func (s *Server) refuseBody(w http.ResponseWriter, r *http.Request, ce *contract.Error) {
	cutBody(w)
	s.writeError(w, r, ce)
}

// cutBody marks the connection to close after the answer and makes any
// further read of the body fail at once; ServeHTTP then closes it by
// lingering (see lingerWriter).
func cutBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	for {
		switch x := w.(type) {
		case *lingerWriter:
			x.cut = true
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

// How long, and for how many bytes, a connection whose body was refused
// lingers after its answer.
const (
	lingerFor = 5 * time.Second
	lingerMax = 4 << 20
)

// lingerWriter is the ResponseWriter ServeHTTP hands on. When the request's
// body was refused (cut), the connection is closed by lingering: the
// answer sent whole, the sending side shut (the client reads the answer,
// then the end of the stream), and what the client still sends of its body
// read and dropped for at most lingerFor or lingerMax bytes before the
// close. A plain close with the client's bytes unread resets the
// connection, and a client still writing its body (a declared length over
// the limit, answered before a byte of it is read) then meets the reset
// instead of the answer.
type lingerWriter struct {
	http.ResponseWriter
	s   *Server
	cut bool
}

func (w *lingerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish lingers over the connection of a refused body. It runs before
// ServeHTTP returns (a connection can be taken over only then); an answer
// without a declared length is left to net/http, which ends it properly.
func (w *lingerWriter) finish() {
	if !w.cut || w.Header().Get("Content-Length") == "" {
		return
	}
	rc := http.NewResponseController(w.ResponseWriter)
	if rc.Flush() != nil {
		return
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		return
	}
	// A hijacked connection is http.Server's no more, and its Shutdown
	// would leave it be: the server's Close ends it.
	if !w.s.linger(conn) {
		conn.Close()
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	go func() {
		defer w.s.unlinger(conn)
		_ = conn.SetReadDeadline(time.Now().Add(lingerFor))
		_, _ = io.Copy(io.Discard, io.LimitReader(conn, lingerMax))
	}()
}

// linger registers conn as lingering, until unlinger; false once the
// server is closed.
func (s *Server) linger(conn net.Conn) bool {
	s.lingerMu.Lock()
	defer s.lingerMu.Unlock()
	if s.stopping() {
		return false
	}
	s.lingering[conn] = struct{}{}
	s.lingers.Add(1)
	return true
}

// unlinger closes conn and forgets it.
func (s *Server) unlinger(conn net.Conn) {
	s.lingerMu.Lock()
	delete(s.lingering, conn)
	s.lingerMu.Unlock()
	conn.Close()
	s.lingers.Done()
}

// endLingering closes every lingering connection, which ends its
// goroutine at once.
func (s *Server) endLingering() {
	s.lingerMu.Lock()
	defer s.lingerMu.Unlock()
	for conn := range s.lingering {
		conn.Close()
	}
}

// streamBody is a streamed route's body: at most max bytes, each read
// making progress within idle. Its errors are *contract.Error
// (BODY_TOO_LARGE, BODY_TIMEOUT), ready to be returned by the handler as
// its answer; the connection closes after it.
type streamBody struct {
	body io.ReadCloser
	w    http.ResponseWriter
	rc   *http.ResponseController
	max  int64
	idle time.Duration

	eof  bool
	fail error
}

func (b *streamBody) Read(p []byte) (int, error) {
	if b.fail != nil {
		return 0, b.fail
	}
	if b.eof {
		return 0, io.EOF
	}
	_ = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
		_ = b.rc.SetReadDeadline(time.Time{})
		return n, io.EOF
	case err != nil:
		return b.cut(unreadBody(err, bodyPolicy{max: b.max, streamed: true, idle: b.idle}))
	}
	return n, nil
}

func (b *streamBody) cut(ce *contract.Error) (int, error) {
	b.fail = ce
	cutBody(b.w)
	return 0, ce
}

func (b *streamBody) Close() error { return b.body.Close() }

// finish is called once the handler has returned: a body it left unread
// is not waited for.
func (b *streamBody) finish() {
	if !b.eof && b.fail == nil {
		cutBody(b.w)
	}
}

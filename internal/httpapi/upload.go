package httpapi

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// A request body has a limit and a time bound, each the route's own. The
// JSON bodies (decodeBody) have MaxBody and BodyTimeout: the whole body
// within both. The file routes' bodies have exec.maxUploadBytes, which the
// daemon applies to the declared length before any byte is read (the
// length goes with the transfer's open) and to the bytes as they come, and
// an idle bound in place of a total one, since a 2 GiB upload cannot arrive
// in 10 s: the body fails BODY_TIMEOUT when no byte has come for
// UploadIdle. A response the file routes stream has the same idle bound on
// each write.

// declaredLength is r's Content-Length when the client sent one.
func declaredLength(r *http.Request) *int64 {
	if r.ContentLength < 0 {
		return nil
	}
	n := r.ContentLength
	return &n
}

// idleBody reads a request body whose every read must bring a byte within
// idle.
type idleBody struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	body io.Reader
	idle time.Duration
}

func (s *Server) idleBody(w http.ResponseWriter, r *http.Request) *idleBody {
	return &idleBody{w: w, rc: http.NewResponseController(w), body: r.Body, idle: s.uploadIdle}
}

func (b *idleBody) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	n, err := b.body.Read(p)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		// The rest of the body is not waited for: the connection ends
		// with the answer.
		b.w.Header().Set("Connection", "close")
		return n, contract.Errorf(contract.CodeBodyTimeout, "no byte of the request body arrived for %s", b.idle).
			With("idleMs", b.idle.Milliseconds())
	}
	if err != nil && !errors.Is(err, io.EOF) {
		b.w.Header().Set("Connection", "close")
		return n, contract.BadRequest("", "could not read the request body: %v", err)
	}
	return n, err
}

// idleWriter writes a streamed response whose every write must be taken
// by the client within idle.
type idleWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

func (s *Server) idleWriter(w http.ResponseWriter) *idleWriter {
	return &idleWriter{w: w, rc: http.NewResponseController(w), idle: s.uploadIdle}
}

func (iw *idleWriter) Write(p []byte) (int, error) {
	_ = iw.rc.SetWriteDeadline(time.Now().Add(iw.idle))
	return iw.w.Write(p)
}

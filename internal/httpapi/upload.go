package httpapi

import (
	"net/http"
	"time"
)

// The file routes' bodies and answers. An upload's body (PUT …/files, POST
// …/apps) has the streamed policy of uploadBody: at most exec.maxUploadBytes
// (a declared length over it is refused before a byte is read, as for every
// route, and the daemon applies the same limit to the transfer), and an idle
// bound in place of a total one, since a 2 GiB upload cannot arrive in 10 s:
// no byte for exec.transferIdleMs is BODY_TIMEOUT. A download (GET …/files,
// …/screenshot) has the same idle bound on each write of its answer.

// uploadBody is the body policy of the routes that take a file.
func (s *Server) uploadBody() bodyPolicy {
	return bodyPolicy{max: s.maxUpload, streamed: true, idle: s.uploadIdle}
}

// declaredLength is r's Content-Length when the client sent one.
func declaredLength(r *http.Request) *int64 {
	if r.ContentLength < 0 {
		return nil
	}
	n := r.ContentLength
	return &n
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

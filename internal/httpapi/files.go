package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"reflect"
	"strconv"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/transfer"
)

// The file routes move files and apps into and out of a leased device
// without naming a host path: PUT and GET /v1/leases/{id}/files?path=…,
// POST /v1/leases/{id}/apps and GET /v1/leases/{id}/screenshot. Each is a
// transfer of the daemon protocol (device.files.put and the rest), its
// bytes streamed between the HTTP body and the daemon one chunk at a time,
// never held whole. The lease is checked as for exec: the caller's own, or
// an operator naming its requester (?requesterId=).

// callAsTransfer is the backend as a transfer.Call for tok's requests: each
// call its own session, as every HTTP call is.
func (s *Server) callAsTransfer(tok contract.TokenRecord) transfer.Call {
	return func(ctx context.Context, op contract.Op, in, out any) error {
		res, err := s.be.Call(ctx, tok, op, in, nil)
		if err != nil {
			return err
		}
		// A result of out's own type is taken as it is: a chunk is not
		// encoded and decoded again on its way through.
		if rv := reflect.ValueOf(out); rv.Kind() == reflect.Pointer && res != nil && rv.Elem().Type() == reflect.TypeOf(res) {
			rv.Elem().Set(reflect.ValueOf(res))
			return nil
		}
		raw, err := json.Marshal(res)
		if err != nil {
			return fmt.Errorf("httpapi: encode backend result %T: %w", res, err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("httpapi: decode backend result as %T: %w", out, err)
		}
		return nil
	}
}

// fileQuery reads the file routes' query: path (where it applies) and
// requesterId. Unknown parameters are refused, as unknown fields are.
func fileQuery(r *http.Request, withPath bool) (devicePath, requesterID string, err error) {
	q := r.URL.Query()
	for k, v := range q {
		switch {
		case k == "path" && withPath, k == "requesterId":
			if len(v) != 1 {
				return "", "", contract.BadRequest(k, "give it once")
			}
		default:
			return "", "", contract.BadRequest(k, "unknown query parameter")
		}
	}
	return q.Get("path"), q.Get("requesterId"), nil
}

// putFile serves PUT /v1/leases/{id}/files?path=…: the body goes to path
// on the lease's device.
func (s *Server) putFile(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	p, requester, err := fileQuery(r, true)
	if err != nil {
		return err
	}
	in := contract.FilesPutInput{LeaseID: r.PathValue("id"), Path: p, Size: declaredLength(r), RequesterID: requester}
	return s.upload(w, r, tok, contract.OpFilesPut, in)
}

// installApp serves POST /v1/leases/{id}/apps: the body is an app to
// install on the lease's device.
func (s *Server) installApp(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	_, requester, err := fileQuery(r, false)
	if err != nil {
		return err
	}
	in := contract.AppInstallInput{LeaseID: r.PathValue("id"), Size: declaredLength(r), RequesterID: requester}
	return s.upload(w, r, tok, contract.OpAppsInstall, in)
}

// upload streams r's body as the transfer op opens and answers what its
// commit did. A transfer is a stream: it takes a place under
// http.maxStreams and the token's http.maxStreamsPerToken until it ends,
// as an exec does. A declared length over the daemon's limit is refused before
// any byte is read.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord, op contract.Op, in any) error {
	if s.stopping() {
		return errStopping()
	}
	id := r.PathValue("id")
	release, err := s.openStream(tok)
	if err != nil {
		// Refused before the body is read: the connection ends with the
		// answer rather than carry the rest of it.
		cutBody(w)
		return err
	}
	defer release()
	ctx, cancel := s.streamContext(r)
	defer cancel()
	// r.Body is the route's streamed body (uploadBody): bounded, and cut
	// with BODY_TOO_LARGE or BODY_TIMEOUT, which end the transfer.
	res, err := transfer.Send(ctx, s.callAsTransfer(tok), op, in, r.Body)
	if err != nil {
		if s.stopping() {
			err = errStopping()
		}
		// What is left of the body is not read: the connection ends
		// with the answer.
		cutBody(w)
		return hideLease(tok, err, id)
	}
	s.writeJSON(w, http.StatusOK, res)
	return nil
}

// getFile serves GET /v1/leases/{id}/files?path=…: the file's bytes, with
// its length.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	p, requester, err := fileQuery(r, true)
	if err != nil {
		return err
	}
	in := contract.FilesGetInput{LeaseID: r.PathValue("id"), Path: p, RequesterID: requester}
	name := ""
	if p != "" {
		name = path.Base(p)
	}
	return s.download(w, r, tok, contract.OpFilesGet, in, name)
}

// getScreenshot serves GET /v1/leases/{id}/screenshot: a PNG.
func (s *Server) getScreenshot(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	_, requester, err := fileQuery(r, false)
	if err != nil {
		return err
	}
	return s.download(w, r, tok, contract.OpScreenshot, contract.ScreenshotInput{LeaseID: r.PathValue("id"), RequesterID: requester}, "")
}

// download streams the transfer op opens as the response, in a place
// under the stream caps as an upload. Until it has
// opened, a refusal is an ordinary JSON error; after, the status and the
// length are sent, and a failure ends the connection short of that length.
func (s *Server) download(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord, op contract.Op, in any, name string) error {
	if s.stopping() {
		return errStopping()
	}
	id := r.PathValue("id")
	release, err := s.openStream(tok)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := s.streamContext(r)
	defer cancel()
	started := false
	_, _, err = transfer.Receive(ctx, s.callAsTransfer(tok), op, in, func(info contract.TransferInfo) (io.Writer, error) {
		h := w.Header()
		h.Set("Content-Type", info.ContentType)
		if info.Size != nil {
			h.Set("Content-Length", strconv.FormatInt(*info.Size, 10))
		}
		if name != "" {
			h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
		}
		w.WriteHeader(http.StatusOK)
		started = true
		if r.Method == http.MethodHead {
			return headOnly{}, nil
		}
		return s.idleWriter(w), nil
	})
	switch {
	case err == nil, errors.Is(err, errHeadOnly):
		return nil
	case started:
		s.log.Info("a download ended early", "path", r.URL.Path, "err", err)
		return nil
	case s.stopping():
		return errStopping()
	}
	return hideLease(tok, err, id)
}

// headOnly ends a HEAD's download at its first byte: the headers are the
// answer, and the transfer is aborted rather than read through.
type headOnly struct{}

var errHeadOnly = errors.New("httpapi: a HEAD request takes no body")

func (headOnly) Write([]byte) (int, error) { return 0, errHeadOnly }

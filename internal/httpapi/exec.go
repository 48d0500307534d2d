package httpapi

import (
	"net/http"
	"time"

	"github.com/simlock/simlock/internal/apiview"
	"github.com/simlock/simlock/internal/contract"
)

// execBody is the body of POST /v1/leases/{id}/exec (apiview).
type execBody = apiview.ExecBody

// execRequest is an exec body with the lease its path names, checked whole
// by the contract's rules as it is decoded.
type execRequest struct {
	execBody
	leaseID string
}

// Validate checks the body with the contract's rules.
func (b *execRequest) Validate() error {
	in := b.Input(b.leaseID)
	return in.Validate()
}

// execOutcome is what device.exec's Call returned.
type execOutcome struct {
	res any
	err error
}

// execOnLease runs a command on a leased device and streams its output.
// Until the backend says the command started, nothing is written, so a
// refusal is an ordinary JSON error; after that the answer is a 200 event
// stream whose last event is the exit code or the error.
func (s *Server) execOnLease(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	if s.stopping() {
		return errStopping()
	}
	id := r.PathValue("id")
	body := execRequest{leaseID: id}
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	// An exec is a stream: it takes a place under http.maxStreams and the
	// token's http.maxStreamsPerToken until it ends.
	release, err := s.openStream(tok)
	if err != nil {
		return err
	}
	defer release()
	// Returning ends the session, and with it the command: the daemon
	// stops it (SIGTERM, then SIGKILL) when the session's context ends,
	// whether the client went away or the stream was closed. The call's
	// goroutine then finishes on its own, since done is buffered and push
	// gives up.
	ctx, cancel := s.streamContext(r)
	defer cancel()
	// Unlike other streams, the push blocks: a client that reads slowly
	// slows the command's output instead of losing it. It gives up once
	// the session ends, so the backend is never stuck on a gone client.
	pushes := make(chan contract.Push, 16)
	push := func(p contract.Push) {
		select {
		case pushes <- p:
		case <-ctx.Done():
		}
	}
	done := make(chan execOutcome, 1)
	go func() {
		res, err := s.be.Call(ctx, tok, contract.OpDeviceExec, body.Input(id), push)
		done <- execOutcome{res, err}
	}()

	var sw *sseWriter
	keepAlive := time.NewTicker(s.keepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case p := <-pushes:
			if sw == nil {
				if p.Push != contract.PushExecStarted && p.Push != contract.PushExecOutput {
					continue
				}
				var err error
				if sw, err = startSSE(w); err != nil {
					return nil
				}
			}
			if err := writeExecPush(sw, p); err != nil {
				return nil
			}
		case out := <-done:
			// Every push of a call comes before its return, but the select
			// may have picked the return first.
			var rest []contract.Push
			for drained := false; !drained; {
				select {
				case p := <-pushes:
					rest = append(rest, p)
				default:
					drained = true
				}
			}
			if sw == nil && out.err != nil && !startedIn(rest) {
				return s.beforeStream(hideLease(tok, out.err, id))
			}
			if sw == nil {
				var err error
				if sw, err = startSSE(w); err != nil {
					return nil
				}
			}
			for _, p := range rest {
				if err := writeExecPush(sw, p); err != nil {
					return nil
				}
			}
			if revoked(ctx) {
				sayRevoked(ctx, sw)
				return nil
			}
			s.writeExecEnd(sw, tok, id, out)
			return nil
		case <-keepAlive.C:
			if sw != nil {
				if err := sw.comment("keepalive"); err != nil {
					return nil
				}
			}
		case <-ctx.Done():
			if revoked(ctx) {
				if sw == nil {
					return errTokenRevoked
				}
				sayRevoked(ctx, sw)
				return nil
			}
			if !s.stopping() {
				return nil // the client left
			}
			if sw == nil {
				return errStopping()
			}
			_ = sw.event("error", "", errorBody{Error: asError(errStopping())})
			return nil
		}
	}
}

// startedIn reports whether pushes show that the command ran.
func startedIn(pushes []contract.Push) bool {
	for _, p := range pushes {
		if p.Push == contract.PushExecStarted || p.Push == contract.PushExecOutput {
			return true
		}
	}
	return false
}

func writeExecPush(sw *sseWriter, p contract.Push) error {
	if p.Push != contract.PushExecOutput || p.Output == nil {
		return nil
	}
	return sw.event("output", "", p.Output)
}

// writeExecEnd writes the exit event, or the error that ended the command.
func (s *Server) writeExecEnd(sw *sseWriter, tok contract.TokenRecord, leaseID string, out execOutcome) {
	err := out.err
	if err != nil && s.stopping() {
		// Close ended the session; what the call made of that is not
		// the client's concern.
		err = errStopping()
	}
	if err == nil {
		res, cerr := convert[contract.ExecResult](out.res)
		if cerr == nil {
			_ = sw.event("exit", "", res)
			return
		}
		err = cerr
	}
	_ = sw.event("error", "", errorBody{Error: asError(hideLease(tok, err, leaseID))})
}

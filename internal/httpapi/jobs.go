package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// listJobs serves GET /v1/jobs?state=&limit=: the newest jobs first.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	in := contract.JobListInput{State: r.URL.Query().Get("state")}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return contract.BadRequest("limit", "must be a whole number from 1 to %d, got %.32q", contract.MaxJobList, v)
		}
		in.Limit = n
	}
	if err := in.Validate(); err != nil {
		return err
	}
	res, err := callAs[contract.JobListResult](r.Context(), s, tok, contract.OpJobList, in)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, res)
	return nil
}

// getJob serves GET /v1/jobs/{id}.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	in := contract.JobIDInput{JobID: r.PathValue("id")}
	if err := in.Validate(); err != nil {
		return err
	}
	res, err := callAs[contract.Job](r.Context(), s, tok, contract.OpJobGet, in)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, res)
	return nil
}

// streamJobEvents serves GET /v1/jobs/{id}/events: the job's state first
// (event job), then its events until done; a job that ended is its state
// and its done event.
func (s *Server) streamJobEvents(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	in := contract.JobIDInput{JobID: r.PathValue("id")}
	if err := in.Validate(); err != nil {
		return err
	}
	return s.streamJob(w, r, tok, contract.OpJobFollow, in)
}

// streamJob runs op, whose pushes are a job's events, and sends each one
// as the SSE event its name says. A refusal before the first event is a
// plain JSON error; after it, an error event ends the stream, unless the
// done event came already (it says how the job ended).
func (s *Server) streamJob(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord, op contract.Op, in any) error {
	release, err := s.openStream(tok)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := s.streamContext(r)
	defer cancel()
	q := newPushQueue()
	done := make(chan error, 1)
	go func() {
		_, err := s.be.Call(ctx, tok, op, in, q.push)
		done <- err
	}()
	var sw *sseWriter
	sawDone := false
	send := func(p contract.Push) bool {
		if p.Push != contract.PushJob || p.Job == nil || p.Job.Name() == "" {
			return true
		}
		if sw == nil {
			if sw, err = startSSE(w); err != nil {
				return false
			}
		}
		sawDone = sawDone || p.Job.Done != nil
		return sw.event(p.Job.Name(), "", p.Job.Body()) == nil
	}
	fellBehind := func() error {
		err := contract.Errorf(contract.CodeCancelled, "the stream fell more than %d events behind the job", pushBuffer)
		if sw == nil {
			return err
		}
		_ = sw.event("error", "", errorBody{Error: err})
		return nil
	}
	keepAlive := time.NewTicker(s.keepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case p := <-q.ch:
			if q.overflowed() {
				return fellBehind()
			}
			if !send(p) {
				return nil
			}
		case <-keepAlive.C:
			if sw != nil && sw.comment("keepalive") != nil {
				return nil
			}
		case err := <-done:
			for drained := false; !drained; {
				select {
				case p := <-q.ch:
					if !send(p) {
						return nil
					}
				default:
					drained = true
				}
			}
			if q.overflowed() {
				return fellBehind()
			}
			switch {
			case err == nil || sawDone:
				if sw == nil {
					// A call that ended without a single event (none
					// here) still answers as a stream.
					if sw, err = startSSE(w); err != nil {
						return nil
					}
				}
				return nil
			case sw == nil:
				return s.beforeStream(err)
			case revoked(ctx):
				sayRevoked(ctx, sw)
				return nil
			default:
				_ = sw.event("error", "", errorBody{Error: asError(s.beforeStream(err))})
				return nil
			}
		}
	}
}

package httpapi

import (
	"net/http"
	"strings"

	"github.com/simlock/simlock/internal/contract"
)

// installBody is the body of POST /v1/components/install.
type installBody struct {
	Platform contract.Platform      `json:"platform"`
	Version  string                 `json:"version"`
	Workers  *contract.WorkerChoice `json:"workers,omitempty"`
}

func (b *installBody) input() contract.ComponentInstallInput {
	return contract.ComponentInstallInput{Platform: b.Platform, Version: b.Version, Workers: b.Workers}
}

func (b *installBody) Validate() error {
	in := b.input()
	return in.Validate()
}

// installComponent installs a runtime: on a worker, here; on a gateway, on
// the workers the body chooses. A client that accepts text/event-stream
// gets the job's events as they happen, ending with done; any other gets
// one JSON answer once the install is over, as a plain call does.
func (s *Server) installComponent(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	if s.stopping() {
		return errStopping()
	}
	var body installBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	if !acceptsEventStream(r) {
		ctx, cancel := s.streamContext(r)
		defer cancel()
		res, err := s.be.Call(ctx, tok, contract.OpComponentInstall, body.input(), nil)
		if err != nil {
			return s.beforeStream(err)
		}
		s.writeJSON(w, http.StatusOK, res)
		return nil
	}
	return s.streamJob(w, r, tok, contract.OpComponentInstall, body.input())
}

// acceptsEventStream reports whether the request's Accept header names
// text/event-stream.
func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}

func (s *Server) listComponents(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	in := contract.ComponentListInput{Platform: contract.Platform(r.URL.Query().Get("platform"))}
	if err := in.Validate(); err != nil {
		return err
	}
	res, err := callAs[contract.ComponentListResult](r.Context(), s, tok, contract.OpComponentList, in)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) removeComponent(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	in := contract.ComponentRemoveInput{Platform: contract.Platform(r.PathValue("platform")), Version: r.PathValue("version")}
	dry, err := queryBool(r, "dryRun")
	if err != nil {
		return err
	}
	in.DryRun = dry
	if err := in.Validate(); err != nil {
		return err
	}
	res, err := callAs[contract.ComponentRemoveResult](r.Context(), s, tok, contract.OpComponentRemove, in)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, res)
	return nil
}

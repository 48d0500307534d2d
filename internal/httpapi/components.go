package httpapi

import (
	"net/http"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// installBody is the body of POST /v1/components/install.
type installBody struct {
	Platform contract.Platform `json:"platform"`
	Version  string            `json:"version"`
}

func (b *installBody) Validate() error {
	in := contract.ComponentInstallInput{Platform: b.Platform, Version: b.Version}
	return in.Validate()
}

// installComponent installs a runtime. Refusals found before the install
// waits or runs (downloads disabled, no driver, no room on disk) are plain
// JSON errors; after that the answer is an event stream of progress events
// ending with result or error.
func (s *Server) installComponent(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	if s.stopping() {
		return errStopping()
	}
	var body installBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	ctx, cancel := s.streamContext(r)
	defer cancel()
	pushes := make(chan contract.Push, 64)
	push := func(p contract.Push) {
		select {
		case pushes <- p:
		default: // a slow client skips a step; the next one says more
		}
	}
	done := make(chan execOutcome, 1)
	go func() {
		res, err := s.be.Call(ctx, tok, contract.OpComponentInstall, contract.ComponentInstallInput{Platform: body.Platform, Version: body.Version}, push)
		done <- execOutcome{res, err}
	}()
	var sw *sseWriter
	start := func() bool {
		if sw != nil {
			return true
		}
		var err error
		sw, err = startSSE(w)
		return err == nil
	}
	keepAlive := time.NewTicker(s.keepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case p := <-pushes:
			if p.Push != contract.PushComponentProgress || p.Component == nil {
				continue
			}
			if !start() || sw.event("progress", "", p.Component) != nil {
				return nil
			}
		case out := <-done:
			for drained := false; !drained; {
				select {
				case p := <-pushes:
					if p.Component != nil && start() {
						_ = sw.event("progress", "", p.Component)
					}
				default:
					drained = true
				}
			}
			if sw == nil && out.err != nil {
				return s.beforeStream(out.err)
			}
			if !start() {
				return nil
			}
			if out.err != nil {
				_ = sw.event("error", "", errorBody{asError(out.err)})
				return nil
			}
			res, err := convert[contract.ComponentInstallResult](out.res)
			if err != nil {
				_ = sw.event("error", "", errorBody{asError(err)})
				return nil
			}
			_ = sw.event("result", "", res)
			return nil
		case <-keepAlive.C:
			if sw != nil && sw.comment("keepalive") != nil {
				return nil
			}
		case <-ctx.Done():
			if !s.stopping() {
				return nil
			}
			if sw == nil {
				return errStopping()
			}
			_ = sw.event("error", "", errorBody{asError(errStopping())})
			return nil
		}
	}
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

package httpapi

import (
	"context"
	"net/http"

	"github.com/simlock/simlock/internal/contract"
)

// HealthFunc runs the checks of a liveness probe (live) or a readiness
// probe (!live). Each check bounds its own wait; ctx ends with the
// request.
type HealthFunc func(ctx context.Context, live bool) []contract.HealthCheck

// probe answers GET /livez (live) and GET /readyz: no token, since
// orchestrators probe without one, and nothing in the answer names
// anything but the checks. 200 when every check passed, 503 otherwise;
// ?verbose (any value, or none) lists the checks.
func (s *Server) probe(w http.ResponseWriter, r *http.Request, live bool) {
	var checks []contract.HealthCheck
	if s.health != nil {
		checks = s.health(r.Context(), live)
	}
	rep := contract.HealthOf(checks, r.URL.Query().Has("verbose"))
	status := http.StatusOK
	if !rep.OK {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, status, rep)
}

// livez and readyz serve the two probes.
func (s *Server) livez(w http.ResponseWriter, r *http.Request)  { s.probe(w, r, true) }
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) { s.probe(w, r, false) }

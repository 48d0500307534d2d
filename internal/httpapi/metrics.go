package httpapi

import (
	"net/http"

	"github.com/simlock/simlock/internal/contract"
)

// serveMetrics serves GET /metrics: to anyone with metrics.public, else to
// an operator token like every operator route (401 and 403 with the usual
// JSON error body). A server built without Options.Metrics has no metrics
// to give and answers as for an unknown route.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	switch {
	case s.metrics == nil:
		s.writeError(w, r, contract.Errorf(contract.CodeUnknownRoute, "no route %s %s", r.Method, r.URL.Path))
	case s.metricsPublic:
		s.metrics.ServeHTTP(w, r)
	default:
		s.authed(accessOperator, func(w http.ResponseWriter, r *http.Request, _ contract.TokenRecord) error {
			s.metrics.ServeHTTP(w, r)
			return nil
		})(w, r)
	}
}

package httpapi

import (
	"net/http"

	"github.com/simlock/simlock/internal/contract"
)

// routeMetrics registers GET /metrics when the daemon serves metrics: for
// anyone with metrics.public, else for an operator token like every
// operator route (401 and 403 with the usual JSON error body).
func (s *Server) routeMetrics() {
	if s.metrics == nil {
		return
	}
	if s.metricsPublic {
		s.mux.Handle("GET /metrics", s.metrics)
		return
	}
	s.handle("GET /metrics", accessOperator, func(w http.ResponseWriter, r *http.Request, _ contract.TokenRecord) error {
		s.metrics.ServeHTTP(w, r)
		return nil
	})
}

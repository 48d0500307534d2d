package contract

// OpMetricsGet answers the daemon's metrics in the Prometheus text format
// (MetricsResult), as GET /metrics serves them. Admin only.
const OpMetricsGet Op = "metrics.get"

// MetricsResult is metrics.get's answer.
type MetricsResult struct {
	// Text is the exposition, in the Prometheus text format (0.0.4).
	Text string `json:"text"`
}

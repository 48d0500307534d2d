package contract

// HealthReport is the answer of GET /livez and GET /readyz: OK is whether
// every check passed (the status is then 200, else 503); Checks lists
// each check only when the caller asked with ?verbose.
type HealthReport struct {
	OK     bool          `json:"ok"`
	Checks []HealthCheck `json:"checks,omitempty"`
}

// HealthCheck is one check of a liveness or readiness probe. Detail says,
// in words, why a check failed (or what it saw); it is left out when
// there is nothing to say.
type HealthCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// The names of the checks a probe runs (docs/OPERATIONS.md).
const (
	// HealthServing: the daemon takes its decision lock within a bound
	// (liveness).
	HealthServing = "serving"
	// HealthStartup: startup converged (readiness).
	HealthStartup = "startup"
	// HealthStore: the store answers a small read within a bound
	// (readiness).
	HealthStore = "store"
	// HealthUplink: a worker whose config names a gateway is connected to
	// it (readiness; absent on a worker with no gateway and on a gateway).
	HealthUplink = "uplink"
	// HealthLeader: a gateway replica leads (readiness; absent on a daemon
	// that is not a replica), so that a load balancer sends work to the
	// leader only.
	HealthLeader = "leader"
)

// HealthOf is the report for checks: OK when each passed; the checks
// themselves only when verbose.
func HealthOf(checks []HealthCheck, verbose bool) HealthReport {
	r := HealthReport{OK: true}
	for _, c := range checks {
		if !c.OK {
			r.OK = false
		}
	}
	if verbose {
		r.Checks = checks
	}
	return r
}

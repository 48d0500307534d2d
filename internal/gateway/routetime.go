package gateway

import (
	"errors"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// TimeRoutes times n routing decisions of a over views, as the gateway's
// leasing makes them (the routing policy over what the gateway keeps of
// each view), and returns each decision's duration. It is how `simlock
// bench --fleet` measures a routing decision: on the views a running
// gateway reports, in the bench's own process, where a decision can be
// timed alone, without the round trips around it.
func TimeRoutes(views []*contract.WorkerView, a Ask, n int) ([]time.Duration, error) {
	if _, ok := route(warmThenFree, a, views); !ok {
		return nil, errors.New("no worker of the views can take the request")
	}
	out := make([]time.Duration, n)
	for i := range out {
		start := time.Now()
		route(warmThenFree, a, views)
		out[i] = time.Since(start)
	}
	return out, nil
}

package gateway

import (
	"errors"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// TimeRoutes times n routing decisions of a over views, as the gateway's
// leasing makes them (the routing policy over the routing index it keeps
// of the views, built here from views as the fleet builds it), and returns
// each decision's duration. It is how `simlock bench --fleet` measures a
// routing decision: on the views a running gateway reports, in the bench's
// own process, where a decision can be timed alone, without the round
// trips around it.
func TimeRoutes(views []*contract.WorkerView, a Ask, n int) ([]time.Duration, error) {
	ix := newRouteIndex(nil)
	for _, v := range views {
		ix.put(v)
	}
	if _, ok := ix.route(a, overlay{}); !ok {
		return nil, errors.New("no worker of the views can take the request")
	}
	out := make([]time.Duration, n)
	for i := range out {
		start := time.Now()
		ix.route(a, overlay{})
		out[i] = time.Since(start)
	}
	return out, nil
}

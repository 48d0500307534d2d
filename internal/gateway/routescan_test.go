package gateway

// The routing decision as it was made before the routing index: every
// stage of the policy over every view. It is the oracle the index is
// checked against (routeindex_test.go).

import (
	"sort"

	"github.com/simlock/simlock/internal/contract"
)

// scanRoute runs the policy over the views and returns the worker the request
// goes to now, or false when none can take it now (it waits, if the
// fast-fail table let it). Ties go to the lowest worker id.
func scanRoute(policy []stage, a Ask, views []*contract.WorkerView) (Route, bool) {
	cs := make([]candidate, 0, len(views))
	for _, v := range views {
		cs = append(cs, candidate{v: v})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].v.ID < cs[j].v.ID })
	warm := false
	for _, st := range policy {
		next := st.apply(a, cs)
		if st.prefer && len(next) == 0 {
			continue
		}
		if st.name == "warm-hit" && len(next) > 0 {
			warm = true
			cs = next
			break // a warm hit settles: no slot is needed
		}
		cs = next
		if len(cs) == 0 {
			return Route{}, false
		}
	}
	c := cs[0]
	r := Route{WorkerID: c.v.ID, Model: c.models[0], Reason: ReasonFreeCapacity}
	switch {
	case warm:
		r.Reason = ReasonWarmHit
		r.Model, r.DeviceID = warmFit(a, c)
	case c.download:
		r.Reason = ReasonDownload
	}
	return r, true
}

// scanAssess is the fast-fail table: what a request gets at once, waiting or
// not, when the fleet as known cannot serve it at all; nil when it may be
// routed or wait. It reads every known view, connected or not, for what
// the fleet has, and the connected ones for who takes requests.
func scanAssess(a Ask, views []*contract.WorkerView) *contract.Error {
	cs := make([]candidate, 0, len(views))
	for _, v := range views {
		cs = append(cs, candidate{v: v})
	}
	if len(takesRequests(a, cs)) == 0 {
		return contract.Errorf(contract.CodeNoCapacity, "no worker of this gateway takes requests now").With("reason", string(contract.RejectNoWorker))
	}
	var platform, model bool
	for _, c := range cs {
		cat, ok := catalogOf(c.v, a.Platform)
		if !ok {
			continue
		}
		platform = true
		if len(modelsAsked(a, cat)) > 0 {
			model = true
		}
	}
	switch {
	case !platform:
		return contract.Errorf(contract.CodeNoDriver, "no worker of this gateway serves %s", a.Platform).With("platform", a.Platform)
	case !model:
		what := a.Model
		if what == "" {
			what = "a " + string(wantOf(a, contract.Catalog{}).Class)
		}
		return contract.Errorf(contract.CodeUnknownModel, "no worker of this gateway has %s on %s", what, a.Platform).With("platform", a.Platform)
	}
	if len(canServe(a, cs)) == 0 {
		return contract.Errorf(contract.CodeRuntimeMissing, "no worker of this gateway has a %s runtime that serves the request", a.Platform).
			With("platform", a.Platform).With("downloadable", false)
	}
	return nil
}

package gateway

import (
	"regexp"

	"github.com/simlock/simlock/internal/contract"
)

// A worker's refusal names things by the worker's names: its own lease ids
// (lse_…), its request ids (req_…) and the requester ids the gateway asks
// under (gw:<gatewayInstanceId>:<requester>). None of them is an agent's to
// know or to use: an agent names a lease by the gateway's id, and the
// worker's request ids and the gateway's requester prefix are nobody's
// business but the gateway's. scrub rewrites them before a worker's
// refusal reaches an agent.
var (
	workerLeaseRE   = regexp.MustCompile(`\blse_[0-9a-f]+\b`)
	workerRequestRE = regexp.MustCompile(`\breq_[0-9a-f]+\b`)
	gatewayPrefixRE = regexp.MustCompile(regexp.QuoteMeta(contract.GatewayRequesterPrefix) + `[A-Za-z0-9._-]+:`)
)

// scrub is ce, workerID's refusal, as the gateway forwards it: each of the
// worker's lease ids the gateway granted named by the gateway's id for it,
// any other one, and the worker's request ids, named as the worker's
// without the id, and the gateway's requester prefix dropped, in the
// message and in every detail; workerId names the worker. The decision lock
// must not be held.
func (l *Leasing) scrub(workerID string, ce *contract.Error) *contract.Error {
	var out *contract.Error
	l.q.View(func() {
		text := func(s string) string {
			s = workerLeaseRE.ReplaceAllStringFunc(s, func(id string) string {
				if e, ok := l.idx.ofWorker(workerID, id); ok {
					return e.id
				}
				return "a lease of worker " + workerID
			})
			s = workerRequestRE.ReplaceAllString(s, "a request on worker "+workerID)
			return gatewayPrefixRE.ReplaceAllString(s, "")
		}
		out = contract.Errorf(ce.Code, "%s", text(ce.Message))
		for k, v := range ce.Details {
			if s, ok := v.(string); ok && unnamed(s) && !l.idx.named(workerID, s) {
				// A detail that is one of the worker's ids the gateway
				// has no name for: nothing an agent could use.
				continue
			}
			out = out.With(k, scrubValue(v, text))
		}
		out = out.With("workerId", workerID)
	})
	return out
}

// unnamed reports whether s is wholly one of a worker's own ids.
func unnamed(s string) bool {
	for _, re := range []*regexp.Regexp{workerLeaseRE, workerRequestRE} {
		if re.FindString(s) == s {
			return true
		}
	}
	return false
}

// scrubValue is v, a detail of a worker's error as JSON decodes it, with
// text applied to every string in it.
func scrubValue(v any, text func(string) string) any {
	switch v := v.(type) {
	case string:
		return text(v)
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = scrubValue(x, text)
		}
		return out
	case []string:
		out := make([]string, len(v))
		for i, x := range v {
			out[i] = text(x)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = scrubValue(x, text)
		}
		return out
	}
	return v
}

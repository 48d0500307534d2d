package daemon

import (
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// eventOps read the event log, whole or as it grows, and the usage drawn
// from it: a worker's log and a gateway's (its own and its workers'
// relayed) are read alike.
func eventOps() []opEntry {
	return []opEntry{
		{op: contract.OpEventsReplay, both: handle(func(c *call, in contract.EventsReplayInput) (contract.EventsReplayResult, error) {
			evs, err := c.d.db.Events(c.s.ctx, store.EventQuery{SinceTs: in.SinceTs, AfterSeq: in.AfterSeq, Limit: in.Limit})
			if err != nil {
				return contract.EventsReplayResult{}, contract.Errorf(contract.CodeInternal, "read events: %v", err)
			}
			if evs == nil {
				evs = []contract.Event{}
			}
			return contract.EventsReplayResult{Events: evs}, nil
		})},
		{op: contract.OpEventsSubscribe, both: handle(func(c *call, _ contract.Empty) (subscription, error) {
			return c.s.subscribe(), nil
		})},
		{op: contract.OpUsageGet, both: handle(func(c *call, in contract.UsageGetInput) (contract.UsageResult, error) {
			return c.d.usage(c.s.ctx, in)
		})},
	}
}

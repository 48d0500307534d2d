package daemon

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/usage"
)

// usagePage is how many events usage reads from the store at a time.
const usagePage = 5000

// usage answers usage.get: it reads the window's events from the log, page
// by page in seq order, and hands them to usage.Compute. A window that ends
// before the oldest event kept is HISTORY_NOT_KEPT.
func (d *Daemon) usage(ctx context.Context, in contract.UsageGetInput) (contract.UsageResult, error) {
	to, bucket, err := in.Window(time.Now().UnixMilli())
	if err != nil {
		return contract.UsageResult{}, err
	}
	step, _ := contract.UsageBucketDuration(bucket)
	span, err := d.db.EventLogSpan(ctx)
	if err != nil {
		return contract.UsageResult{}, contract.Errorf(contract.CodeInternal, "read event log span: %v", err)
	}
	if span.OldestTs != 0 && to <= span.OldestTs {
		return contract.UsageResult{}, contract.Errorf(contract.CodeHistoryNotKept,
			"the event log keeps events from %s on; the window ends before", time.UnixMilli(span.OldestTs).UTC().Format(time.RFC3339)).With("oldestTs", span.OldestTs)
	}
	var evs []contract.Event
	q := store.EventQuery{SinceTs: in.From, Limit: usagePage}
	for {
		page, err := d.db.Events(ctx, q)
		if err != nil {
			return contract.UsageResult{}, contract.Errorf(contract.CodeInternal, "read events: %v", err)
		}
		done := len(page) < usagePage
		for _, e := range page {
			if e.Timestamp >= to {
				done = true
				break
			}
			evs = append(evs, e)
		}
		if done {
			break
		}
		q.AfterSeq = page[len(page)-1].Seq
	}
	return usage.Compute(evs, usage.Window{
		From: in.From, To: to, Bucket: bucket, Step: step,
		OldestTs: span.OldestTs, Gateway: d.fleet != nil,
	}), nil
}

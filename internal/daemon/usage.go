package daemon

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/usage"
)

// usage answers usage.get from the rollups the store keeps as events
// commit: it reads the rows of the window's whole minutes into a
// usage.Query. The history starts at the minute of the oldest event kept;
// a window that ends by then is HISTORY_NOT_KEPT.
func (d *Daemon) usage(ctx context.Context, in contract.UsageGetInput) (contract.UsageResult, error) {
	from, to, bucket, err := in.Window(time.Now().UnixMilli())
	if err != nil {
		return contract.UsageResult{}, err
	}
	step, _ := contract.UsageBucketDuration(bucket)
	span, err := d.db.EventLogSpan(ctx)
	if err != nil {
		return contract.UsageResult{}, contract.Errorf(contract.CodeInternal, "read event log span: %v", err)
	}
	var covers int64
	if span.OldestTs != 0 {
		covers = contract.UsageMinute(span.OldestTs)
	}
	if covers != 0 && to <= covers {
		return contract.UsageResult{}, contract.Errorf(contract.CodeHistoryNotKept,
			"the event log keeps events from %s on; the window ends before", time.UnixMilli(covers).UTC().Format(time.RFC3339)).
			With("oldestTs", span.OldestTs).With("coversFrom", covers)
	}
	q := usage.NewQuery(usage.Window{From: from, To: to, Bucket: bucket, Step: step, CoversFrom: covers, Gateway: d.fleet != nil})
	if err := d.db.UsageRows(ctx, max(from, covers), to, q); err != nil {
		return contract.UsageResult{}, contract.Errorf(contract.CodeInternal, "read usage rollups: %v", err)
	}
	return q.Result(), nil
}

package store

import (
	"context"
	"errors"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/usage"
)

// GatewayStore is what a gateway keeps in its store, and all it calls on
// it: the HTTP tokens, the workers it knows, the fleet queue's request
// records and events with the grant records, the relayed event log, jobs,
// usage rollups and the pruning of history. Both the SQLite backend and
// the PostgreSQL one implement it, so a gateway runs on either; a worker
// needs more of its store (devices, components) and keeps SQLite.
type GatewayStore interface {
	Reserver
	Commit(ctx context.Context, c Change) ([]contract.Event, error)
	Load(ctx context.Context) (Snapshot, error)
	Request(ctx context.Context, id string) (contract.LeaseRequestRecord, bool, error)
	RequestByKey(ctx context.Context, requesterID, key string) (contract.LeaseRequestRecord, bool, error)
	Requests(ctx context.Context, limit int) ([]contract.LeaseRequestRecord, error)
	Grants(ctx context.Context) ([]Grant, error)

	Events(ctx context.Context, q EventQuery) ([]contract.Event, error)
	LastSeq(ctx context.Context) (int64, error)
	EventLogSpan(ctx context.Context) (EventLogSpan, error)
	RelayEvents(ctx context.Context, workerID string, evs []contract.Event, lastSeq int64) ([]contract.Event, error)
	RelayBatches(ctx context.Context, bs []RelayBatch) ([][]contract.Event, error)

	Tokens(ctx context.Context) ([]Token, error)
	PutToken(ctx context.Context, t Token) error
	DeleteToken(ctx context.Context, id string) (bool, error)

	Workers(ctx context.Context) ([]Worker, error)
	PutWorker(ctx context.Context, w Worker) error
	DeleteWorker(ctx context.Context, id string) error

	PutJob(ctx context.Context, j contract.Job) error
	Job(ctx context.Context, id string) (contract.Job, bool, error)
	Jobs(ctx context.Context, state string, limit int) ([]contract.Job, error)
	DeleteJobsBefore(ctx context.Context, ts int64) (int, error)

	UsageRows(ctx context.Context, from, to int64, sink UsageSink) error

	// FleetID is the fleet's identity, the id workers know the gateway
	// by: proposed (the first gateway's instance id) is stored the first
	// time, and the stored one is returned ever after, so every replica
	// sharing the store, and every restart, names the fleet alike.
	FleetID(ctx context.Context, proposed string) (string, error)

	PruneEvents(ctx context.Context, olderThan int64, keepMax int) (int64, error)
	PruneRequests(ctx context.Context, settledBefore int64, keepMax int) (int64, error)
	PruneLeases(ctx context.Context, endedBefore int64) (int64, error)

	Close() error
}

// RelayBatch is one worker's relayed events and the cursor they move its
// relay to: what RelayEvents takes, and what RelayBatches takes several
// of, of one worker or of many, to commit at once.
type RelayBatch struct {
	WorkerID string
	Events   []contract.Event
	LastSeq  int64
}

// Check refuses a batch that names no worker: its cursor could be no
// worker's. Every backend checks each batch with it, in the transaction
// that writes the batches, so a refused batch fails them all.
func (b RelayBatch) Check() error {
	if b.WorkerID == "" {
		return errors.New("relay batch without a worker")
	}
	return nil
}

// UsageSink takes usage rollup rows (usage.Sink: every backend's
// UsageRows takes it); *usage.Query is one.
type UsageSink = usage.Sink

// Package usage derives usage figures (contract.UsageResult) from the
// daemon's event log: how many leases were asked for and granted, from
// where, how long requesters waited and held, and what was refused and why.
//
// The figures are kept as rollups that the store maintains as events
// commit, so a query reads a window's rollup rows, never its events. This
// package holds both halves and no I/O:
//
//   - the fold (Batch): what a batch of committed events adds to the
//     rollups. The store calls it in the transaction that appends the
//     events, with the requests and leases still open that the events
//     complete, and writes back what it returns. Every rule that turns an
//     event into a figure is in Batch.Fold.
//   - the query (Query): rollup rows in, contract.UsageResult out.
//
// The rollup's grain is a cell: one minute of one platform's events from
// one source, which is the daemon's own events (worker "") or, on a
// gateway, the events it relayed from one worker (the worker's id). A cell
// holds the Deltas folded into it, encoded (AppendDelta); the store may
// gather a closed hour's cells of one source and platform into one row
// (AppendChunk). Durations are counted in the cell of the event that ends
// them, from the open request or lease the fold kept for them: a request
// (lease.requested) until it is granted or refused, a lease (lease.granted)
// until it ends.
//
// On a gateway the workers' relayed events count for the worker that
// relayed them, as far as they are about requests the gateway forwarded
// there (their requester carries the gateway's prefix; what a worker's own
// agents ask of it is not the gateway's to count). The gateway's own
// fleet-queue events count for worker "" only until the request is handed
// to a worker (request.dispatched): its request then moves to the worker's
// figures, which count it from the worker's own events, so a request that
// reached a worker is counted once. What remains under "" is what the
// fleet queue ended by itself: requests refused, timed out or cancelled
// before any worker took them. Grants are the gateway's word alone: its
// grant.recorded counts one for the worker it names, and a worker's
// relayed lease.granted counts nothing, so a worker cannot add grants to
// the gateway's figures.
//
// Everything here is pure and keeps no state between calls; a Batch or a
// Query is used by one goroutine at a time.
package usage

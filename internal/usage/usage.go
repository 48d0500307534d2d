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
// gateway, those it counts for one worker (the worker's id). A cell
// holds the Deltas folded into it, encoded (AppendDelta); the store may
// gather a closed hour's cells of one source and platform into one row
// (AppendChunk). Durations are counted in the cell of the event that ends
// them, from the open request or lease the fold kept for them: a request
// (lease.requested) until it is granted or refused, a lease (lease.granted)
// until it ends.
//
// On a gateway the figures are the gateway's own word. Its fleet-queue
// requests count for worker "" until handed to a worker
// (request.dispatched), then for that worker; its grant.recorded counts a
// grant for the worker it names; its refusal of a request it had
// dispatched counts for that worker. Of a worker's relayed events only the
// end of a lease the gateway recorded counts (its hold): a worker's
// relayed requests, grants and refusals, whatever they claim, add nothing,
// and what a worker's own agents ask of it directly is not the gateway's
// to count. What remains under "" is what the fleet queue ended by itself:
// requests refused, timed out or cancelled before any worker took them.
//
// Everything here is pure and keeps no state between calls; a Batch or a
// Query is used by one goroutine at a time.
package usage

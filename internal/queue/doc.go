// Package queue is simlock's request book and fair wait queue. It knows
// lease requests and the requesters waiting on them, and nothing of devices,
// drivers or databases: what serves a request is decided by a Placer, and
// what is made durable goes through a Store, both given by the owner: the
// worker's lease engine (internal/leasing), whose Placer places on the
// machine's devices, and a gateway's leasing (internal/gateway), whose
// Placer routes each request to a worker of the fleet.
//
// # The front desk
//
// [Desk] is what both owners answer the request operations with (acquire,
// submit, status, retry, cancel): the TTL bounds and default, the
// requester a call may name, one open request or lease per requester,
// idempotency and the request's spec (contract.LeaseRequestInput.Spec)
// are decided there and in the queue, once for both modes; an owner adds
// only how a request resolves into what its Placer places.
//
// # What the queue owns
//
// Request records (stored before anything is told, settled exactly once),
// idempotency keys (a repeat joins the open request or gets the stored
// answer), one open request or lease per requester, arrival order with head
// blocking, queue positions (pushed only to waiters whose position changed;
// in a line longer than placesInline, by one walk within placesEvery),
// each request's timeoutMs (one deadline, fixed when it first joins the
// line: a request put back in line gets only the time left, and one put
// back after its deadline fails with QUEUE_TIMEOUT at once), noWait (decided
// in one place: a request that cannot be placed when it joins the line
// fails with NO_CAPACITY), cancel and abandon, and the revisions long-polls
// wait on.
//
// # The decision step
//
// Every decision — the queue's and the owner's — runs in [Queue.Do] or
// [Queue.Try] under one lock, as one [Txn]: the decision changes memory at
// once (so the rest of it reads its own writes), collects its records and
// events, and, before it commits, the queue serves the line if the
// decision may have made room (the owner calls [Txn.Kick]). Then one Store
// commit writes it all. Only after that commit is anyone told anything:
// events are published, waiters woken, progress pushed, slow work started
// (a Start that tells nobody until a later decision of its own may start
// as its placement is decided, overlapping the commit: [Start.Early]).
// A decision that only made a request and placed it at once, with a Start
// that tells nobody until a later decision of its own ([Start.Carry]),
// may leave its writes to the next decision, which commits them first
// with its own: nobody is shown or told anything of that request before.
//
// A store that can ([Reserver]: the worker's SQLite store) gives the
// decision its write lock before the decision lock is taken, so a
// database locked by another process is met before anything changes: a
// caller's decision ([Queue.Try]) then fails with INTERNAL, that call
// only, and one that must happen ([Queue.Do]: a timer fired, driver work
// finished) waits, trying again, until the lock is had. Reads under the
// decision lock go on meanwhile. A commit that fails all the same (the
// disk, not the lock) is fatal: the queue answers every waiter with
// INTERNAL, refuses every later decision and tells the owner
// (Options.Fatal), who stops; the next start converges from the database,
// which holds only what was committed. So no decision needs an undo, and no
// caller ever hears of a decision that was not saved.
//
// # Serving, head blocking and passing over
//
// Waiters join one line per platform; the line across platforms keeps
// arrival order. Serving repeatedly takes the earliest waiter not held by
// an earlier one in this pass and asks the Placer to place it. A waiter
// that must wait holds, for the rest of the pass, the later waiters of its
// class of need ([ScopeNeed]: the same platform and an equal [Keyed] key,
// what the gateway's fleet uses), or every later waiter of its platform
// ([ScopePlatform]), or, when what it waits for is machine- or fleet-wide,
// every later waiter of every platform ([ScopeAll]).
//
// So fairness is kept per class of need: a waiter is never overtaken by a
// later one that asks for the same thing, while one that nothing can serve
// now is passed over by later waiters of other needs that something can.
// And a passed-over waiter is placed first as soon as room for it appears:
// every pass walks the line in arrival order, so it is asked before any
// later waiter in the pass that frees the room (and a Start reserves what
// it takes before the next waiter is asked). A pass costs the number of
// waiters placed plus one Place per blocked class of need (one per
// platform for a plain block), whatever the length of the line, and one
// walk of it.
//
// # The placement consistency model
//
// A Placer may assume that Place is called under the decision lock, in
// arrival order, for the earliest waiter of a platform's line that no
// earlier waiter holds (the head, unless ScopeNeed passed over some), at
// most once per waiter per pass, and that nothing else decides while it runs: what it
// reads of its own state is exact for the duration of the call. It must not
// block. When it returns a Start it must have reserved, in the same Txn,
// everything the Start will use, so the next waiter placed in the pass
// cannot be given the same room; the Start runs after the commit (or, when
// Early, while it commits), outside the lock, and ends the waiter exactly once: granted ([Txn.Grant]), back
// in line ([Txn.Requeue]: the room could not be made after all), or failed
// ([Txn.Settle]). A Placer whose view of capacity lags reality (a gateway
// working from worker reports) places optimistically on that view; a Start
// refused by the real holder of the capacity (a worker's NO_CAPACITY) is a
// stale view, and the waiter goes back in line with its place and deadline.
// A Block is a claim about now only: the queue asks again after every
// decision that kicks it, and never remembers a block between passes.
//
// All exported methods are safe for concurrent use. Callbacks given to the
// queue (progress functions, Placer methods, Options hooks) are called with
// the decision lock held and must not block or call back into the queue,
// except Start.Run and Resolution.Park, which run as tracked work outside
// it.
package queue

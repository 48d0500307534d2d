// Package bench measures simlock's own costs from outside, as a user meets
// them (`simlock bench`): it starts the real daemon (the simlock binary's
// `daemon run`) in a temporary SIMLOCK_HOME with demo devices at zero
// timings, holds N leases, and times round trips through the typed client,
// beside the store's floor (one durable SQLite commit) measured in the same
// run. With a soak it runs steady lease traffic instead and samples what
// would show a leak. With --fleet (fleet.go) it times the same workload
// through a gateway on SQLite and one on PostgreSQL, each with demo workers
// joined to it, beside PostgreSQL's own commit in the same run (the server
// the --postgres URL names, or a throwaway cluster from internal/pgserver).
// docs/PERFORMANCE.md says what each row measures.
//
// Every wait is bounded, and every exit path (Ctrl-C included) stops the
// daemons it started and removes the temporary home. The renderers are
// pure: a result in, text out.
package bench

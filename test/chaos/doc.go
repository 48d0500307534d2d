// Package chaos holds simlock's chaos tests: agents leasing over the socket
// and HTTP against the real binary while the daemon is killed with SIGKILL
// at random points, with the invariants that must survive every kill
// checked after each restart; a fleet (a gateway and three demo workers,
// each joined with its own join token) whose workers and gateway are killed
// with SIGKILL and started again, or stopped with SIGSTOP for a while, with
// agents leasing through the gateway and the fleet's invariants checked by
// name after each fault and once it settled; the same fleet with three
// gateway replicas on a throwaway PostgreSQL cluster, whose leader is
// killed and paused past its timeout and whose database is restarted, with
// the rows' terms checked too; and sessions that never read, whose memory
// must be given back once the daemon drops them.
//
// Every violation is reported under the name of the check that found it,
// and the runs end with a summary by check. They are seeded: the seed is
// logged, and SIMLOCK_CHAOS_SEED=<seed> makes the same schedule of faults
// and operations again (the daemons' timing still varies).
// SIMLOCK_CHAOS_LOGS=<dir> keeps the fleet's daemon logs there.
//
// They are opt-in, as they take a while: set SIMLOCK_CHAOS=1 (the CI run
// does). Flags after -args size a longer run:
//
//	SIMLOCK_CHAOS=1 go test ./test/chaos -v -count=1 -args -kills 200 -ops 20000 -faults 100 -replica-faults 100
package chaos

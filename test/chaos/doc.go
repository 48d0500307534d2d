// Package chaos holds simlock's chaos tests: agents leasing over the socket
// and HTTP against the real binary while the daemon is killed with SIGKILL
// at random points, with the invariants that must survive every kill
// checked after each restart; and sessions that never read, whose memory
// must be given back once the daemon drops them.
//
// They are opt-in, as they take a while: set SIMLOCK_CHAOS=1 (the CI run
// does). Flags after -args size a longer run:
//
//	SIMLOCK_CHAOS=1 go test ./test/chaos -v -count=1 -args -kills 200 -ops 20000
package chaos

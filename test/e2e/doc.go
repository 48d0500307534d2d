// Package e2e holds simlock's end-to-end tests. They build the real simlock
// binary once (TestMain), then drive it exactly as an agent or an operator
// would: CLI commands run as child processes, and a few tests speak the
// newline-delimited JSON daemon protocol on the unix socket directly.
//
// Every test gets its own short SIMLOCK_HOME (os.MkdirTemp("", "slk"), since
// a unix socket path is limited to about 104 bytes) and therefore its own
// daemon, started on demand by the CLI with SIMLOCK_DRIVERS=demo so no Xcode
// or Android SDK is needed. Demo timings are set small through
// `simlock config set` before the daemon first starts. A test's cleanup kills
// the CLI processes it started, stops its daemon (`simlock daemon stop`, then
// SIGKILL if the daemon still holds daemon.lock) and removes the home, so no
// process outlives its test.
//
// The tests never sleep to wait for something: they wait for an output line
// (progress on stderr, a grant on stdout, an event from
// `simlock events --follow`), for a process to exit, or for a state polled
// through the CLI, each with a generous failure bound.
//
// Run them from the module root with
//
//	go test ./test/e2e/ -count=1
//
// They run in well under a minute on a two-core machine.
//
// This package has no non-test code.
package e2e

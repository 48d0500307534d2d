package contract

// OpPing does nothing but answer: `{}` in, `{}` out, for any caller that
// said hello, in either mode and during startup. It takes no lock and reads
// no store, so its round trip is the protocol's own cost: `simlock bench`
// states the daemon's goals against it (the in-situ floor), and a client
// can tell a live daemon from a busy one with it. A gateway answers it
// itself; it is never forwarded to a worker.
const OpPing Op = "ping"

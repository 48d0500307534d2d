// Package uplink is the transport of gateway mode: a worker daemon dials out
// to its gateway over one WebSocket, and the gateway then speaks the ordinary
// daemon protocol to the worker, as a client, over that socket.
//
// A Conn is a net.Conn over the WebSocket that keeps the protocol's framing:
// one newline-delimited frame is one text message, so the daemon's reader and
// the typed client run over it unchanged, and a peer that breaks the framing
// is refused with a close status that says why. The Conn also keeps watch on
// the peer with pings, since a worker behind NAT or a proxy can vanish without
// a FIN reaching the other end.
//
// The package owns the socket from NewConn (or Accept, or Dial) on; the caller
// owns the Conn. A Conn's methods are safe for concurrent use; Read calls are
// served one at a time, and each Write's lines go out together. Backoff is
// for the one goroutine that redials: Redial runs that goroutine's rounds,
// and DialFirst is one round over a gateway's replicas, following a
// replica's NOT_LEADER hint only to a URL the worker lists and dialling
// the next URL beside one that stays silent (DialStagger).
package uplink

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Path is the gateway's uplink endpoint.
const Path = "/v1/uplink"

// The headers a worker names itself with when it dials; the gateway checks
// them with CheckWorkerID and CheckLabel.
const (
	HeaderWorkerID    = "X-Simlock-Worker-Id"
	HeaderWorkerLabel = "X-Simlock-Worker-Label"
)

// Options configure a Conn. The zero value is ready to use.
type Options struct {
	// MaxFrame is the largest message this end accepts, in bytes
	// (contract.MaxFrameLen when 0). It bounds what this end reads: the
	// gateway, which reads the daemon's answers, must allow what the typed
	// client allows (a full status is larger than any request).
	MaxFrame int64
	// Heartbeat is how often this end pings the peer (10 s when 0). A
	// peer that leaves three pings in a row unanswered is taken for dead.
	Heartbeat time.Duration
	// OnRTT, when set, is told each answered ping's round trip. It runs
	// on the heartbeat's goroutine, so it must be quick.
	OnRTT func(time.Duration)
}

const (
	defaultHeartbeat = 10 * time.Second
	// missedPings is how many unanswered pings in a row end the Conn.
	missedPings = 3
	// maxCloseGrace bounds how long a closing Conn waits for the peer to
	// answer its close frame before it drops the socket.
	maxCloseGrace = 2 * time.Second
)

func (o Options) withDefaults() Options {
	if o.MaxFrame <= 0 {
		o.MaxFrame = contract.MaxFrameLen
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = defaultHeartbeat
	}
	return o
}

// closeGrace is how long a closing Conn waits for the peer's close frame:
// one heartbeat, since a peer that cannot answer within one is as good as
// silent, and never more than maxCloseGrace.
func (o Options) closeGrace() time.Duration { return min(o.Heartbeat, maxCloseGrace) }

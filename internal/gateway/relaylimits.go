package gateway

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// workerEvents are the events a worker records, the only ones a gateway
// relays from one: every event of docs/EVENTS.md's tables but its Fleet
// section's, which are a gateway's own (a test holds this table and the
// document to each other). A relayed event of any other name (a
// worker.connected, a request.dispatched or a grant.recorded passed off
// as the gateway's, or a name no simlock records) is dropped and counted.
var workerEvents = map[string]bool{
	contract.EvLeaseRequested: true, contract.EvLeaseQueued: true, contract.EvLeaseGranted: true, contract.EvLeaseRenewed: true,
	contract.EvLeaseReleased: true, contract.EvLeaseBound: true, contract.EvLeaseExpired: true, contract.EvLeaseRejected: true,
	contract.EvDeviceProvisioned: true, contract.EvDeviceReady: true, contract.EvDeviceSlimmed: true, contract.EvDeviceSlimFailed: true,
	contract.EvDeviceReclaimed: true, contract.EvDevicePurgeFailed: true, contract.EvDeviceQuarantined: true,
	contract.EvDeviceRetryRequested: true, contract.EvDeviceQuarantineRetryFailed: true, contract.EvDeviceQuarantineRecovered: true,
	contract.EvDeviceQuarantineAbandoned: true, contract.EvDeviceStalledTransitionDetected: true, contract.EvDeviceCrashDetected: true,
	contract.EvDeviceRecovered: true, contract.EvDeviceRecoveryFailed: true, contract.EvDeviceShutdown: true, contract.EvDeviceDeleted: true,
	contract.EvWarmPoolTargetMissed: true,
	contract.EvDeviceOrphanPurged:   true, contract.EvDeviceForeignProvenanceDetected: true, contract.EvDeviceForeignStateDetected: true,
	contract.EvMaintenanceStarted: true, contract.EvMaintenanceEnded: true,
	contract.EvCleanupExecuted:         true,
	contract.EvDriverRootRejected:      true,
	contract.EvComponentInstallStarted: true, contract.EvComponentInstalled: true, contract.EvComponentInstallFailed: true, contract.EvComponentRemoved: true,
	contract.EvCatalogChanged:  true,
	contract.EvCapacityChanged: true, contract.EvQueueChanged: true, contract.EvDaemonStarted: true, contract.EvDaemonStopping: true,
	contract.EvClockJumped: true, contract.EvTokenCreated: true, contract.EvTokenRevoked: true,
}

// maxRelayedPayload bounds the payload of one event a gateway relays. A
// worker's events are a few hundred bytes, a driver's error in one at most
// a few KiB; the gateway's log is bounded in events (eventLog.maxEvents),
// so this bounds it on disk too. A larger one is dropped and counted as
// refused.
const maxRelayedPayload = 16 << 10

// relayable reports whether a worker may relay ev at all, whatever its
// rate: a name a worker records, and a payload within maxRelayedPayload.
func relayable(ev contract.Event) bool {
	return workerEvents[ev.Event] && len(ev.Payload) <= maxRelayedPayload
}

// The rate at which a gateway relays one worker's events: a token bucket
// of relayBurst events, refilled at relayRate a second. A busy worker
// records a few events a second; the burst covers a catch-up after a
// reconnect (hours of a busy worker's history). An event over the rate is
// dropped and counted, never waited for: the uplink's read loop, which
// every call to that worker shares, is never held up.
const (
	relayRate  = 50
	relayBurst = 5000
)

// tokenBucket is a rate limit of rate a second with bursts of burst. The
// zero value is not ready; newTokenBucket starts it full.
type tokenBucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func newTokenBucket(rate, burst float64, now time.Time) *tokenBucket {
	return &tokenBucket{rate: rate, burst: burst, tokens: burst, last: now}
}

// take takes one token at now, if there is one.
func (b *tokenBucket) take(now time.Time) bool {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

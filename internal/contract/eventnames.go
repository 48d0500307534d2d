package contract

// The name of every event the daemon records (docs/EVENTS.md has what each
// means and carries). Code that records or reads an event names it by
// these constants, so a name is spelled once.
const (
	// Lease requests and leases.
	EvLeaseRequested = "lease.requested"
	EvLeaseQueued    = "lease.queued"
	EvLeaseGranted   = "lease.granted"
	EvLeaseRenewed   = "lease.renewed"
	EvLeaseReleased  = "lease.released"
	EvLeaseBound     = "lease.bound"
	EvLeaseExpired   = "lease.expired"
	EvLeaseRejected  = "lease.rejected"

	// Devices.
	EvDeviceProvisioned               = "device.provisioned"
	EvDeviceReady                     = "device.ready"
	EvDeviceSlimmed                   = "device.slimmed"
	EvDeviceSlimFailed                = "device.slim-failed"
	EvDeviceReclaimed                 = "device.reclaimed"
	EvDevicePurgeFailed               = "device.purge-failed"
	EvDeviceQuarantined               = "device.quarantined"
	EvDeviceRetryRequested            = "device.retry-requested"
	EvDeviceQuarantineRetryFailed     = "device.quarantine-retry-failed"
	EvDeviceQuarantineRecovered       = "device.quarantine-recovered"
	EvDeviceQuarantineAbandoned       = "device.quarantine-abandoned"
	EvDeviceStalledTransitionDetected = "device.stalled-transition-detected"
	EvDeviceCrashDetected             = "device.crash-detected"
	EvDeviceRecovered                 = "device.recovered"
	EvDeviceRecoveryFailed            = "device.recovery-failed"
	EvDeviceShutdown                  = "device.shutdown"
	EvDeviceDeleted                   = "device.deleted"

	// Warm pool.
	EvWarmPoolTargetMissed = "warm-pool.target-missed"

	// Doctor.
	EvDeviceOrphanPurged              = "device.orphan-purged"
	EvDeviceForeignProvenanceDetected = "device.foreign-provenance-detected"
	EvDeviceForeignStateDetected      = "device.foreign-state-detected"

	// Maintenance.
	EvMaintenanceStarted = "maintenance.started"
	EvMaintenanceEnded   = "maintenance.ended"

	// Cleanup.
	EvCleanupExecuted = "cleanup.executed"

	// Drivers.
	EvDriverRootRejected = "driver.root-rejected"

	// Components.
	EvComponentInstallStarted = "component.install-started"
	EvComponentInstalled      = "component.installed"
	EvComponentInstallFailed  = "component.install-failed"
	EvComponentRemoved        = "component.removed"
	EvCatalogChanged          = "catalog.changed"

	// Capacity, queue and daemon.
	EvCapacityChanged = "capacity.changed"
	EvQueueChanged    = "queue.changed"
	EvDaemonStarted   = "daemon.started"
	EvClockJumped     = "clock.jumped"
	EvDaemonStopping  = "daemon.stopping"

	// Tokens.
	EvTokenCreated = "token.created"
	EvTokenRevoked = "token.revoked"

	// Fleet.
	EvWorkerConnected    = "worker.connected"
	EvWorkerDisconnected = "worker.disconnected"
	EvWorkerDrained      = "worker.drained"
	EvWorkerUndrained    = "worker.undrained"
	EvWorkerRemoved      = "worker.removed"
	EvRequestDispatched  = "request.dispatched"
	EvGrantRecorded      = "grant.recorded"
	EvWorkerRejected     = "worker.rejected"
	EvGatewayElected     = "gateway.elected"
)

// EventNames lists every event name, in the order docs/EVENTS.md lists them.
func EventNames() []string {
	return []string{
		EvLeaseRequested, EvLeaseQueued, EvLeaseGranted, EvLeaseRenewed, EvLeaseReleased, EvLeaseBound, EvLeaseExpired, EvLeaseRejected,
		EvDeviceProvisioned, EvDeviceReady, EvDeviceSlimmed, EvDeviceSlimFailed, EvDeviceReclaimed, EvDevicePurgeFailed, EvDeviceQuarantined, EvDeviceRetryRequested, EvDeviceQuarantineRetryFailed, EvDeviceQuarantineRecovered, EvDeviceQuarantineAbandoned, EvDeviceStalledTransitionDetected, EvDeviceCrashDetected, EvDeviceRecovered, EvDeviceRecoveryFailed, EvDeviceShutdown, EvDeviceDeleted,
		EvWarmPoolTargetMissed,
		EvDeviceOrphanPurged, EvDeviceForeignProvenanceDetected, EvDeviceForeignStateDetected,
		EvMaintenanceStarted, EvMaintenanceEnded,
		EvCleanupExecuted,
		EvDriverRootRejected,
		EvComponentInstallStarted, EvComponentInstalled, EvComponentInstallFailed, EvComponentRemoved, EvCatalogChanged,
		EvCapacityChanged, EvQueueChanged, EvDaemonStarted, EvClockJumped, EvDaemonStopping,
		EvTokenCreated, EvTokenRevoked,
		EvWorkerConnected, EvWorkerDisconnected, EvWorkerDrained, EvWorkerUndrained, EvWorkerRemoved, EvRequestDispatched, EvGrantRecorded, EvWorkerRejected,
		EvGatewayElected,
	}
}

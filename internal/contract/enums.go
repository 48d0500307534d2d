package contract

// The closed sets of the contract's named string types that have no list
// of their own beside their constants: what the API description gives as
// each type's enum.

// DeviceStates lists every device state.
func DeviceStates() []DeviceState {
	return []DeviceState{DeviceProvisioning, DeviceReady, DeviceLeased, DeviceReclaiming, DeviceShutdown,
		DeviceQuarantined, DeviceDeleted}
}

// DeviceModes lists the device modes.
func DeviceModes() []DeviceMode { return []DeviceMode{DeviceModeFull, DeviceModeSlim} }

// RequestStates lists every state of a stored lease request.
func RequestStates() []RequestState {
	return []RequestState{RequestQueued, RequestStarting, RequestGranted, RequestFailed, RequestCancelled}
}

// Stages lists the stages of a wait, in the order they can happen.
func Stages() []Stage {
	return []Stage{StageQueued, StageDownloading, StageReclaiming, StageProvisioning, StageBooting}
}

// TokenRoles lists the roles of an HTTP bearer token.
func TokenRoles() []TokenRole { return []TokenRole{TokenAgent, TokenOperator, TokenWorker} }

// EndReasons lists every lease-end reason.
func EndReasons() []EndReason {
	return []EndReason{EndReleased, EndExpired, EndKilled, EndDeviceLost, EndBoundProcessExited}
}

// WorkerConnections lists how a gateway can be connected to a worker.
func WorkerConnections() []WorkerConnection {
	return []WorkerConnection{WorkerConnected, WorkerDisconnected, WorkerIncompatible}
}

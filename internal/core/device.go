package core

import (
	"fmt"

	"github.com/simlock/simlock/internal/contract"
)

// transitions is the device state machine: from each state, the states a
// device may move to. Read-only.
var transitions = map[contract.DeviceState][]contract.DeviceState{
	contract.DeviceProvisioning: {contract.DeviceReady, contract.DeviceQuarantined, contract.DeviceDeleted},
	contract.DeviceReady:        {contract.DeviceLeased, contract.DeviceShutdown, contract.DeviceDeleted},
	contract.DeviceLeased:       {contract.DeviceReclaiming},
	contract.DeviceReclaiming:   {contract.DeviceReady, contract.DeviceShutdown, contract.DeviceQuarantined, contract.DeviceDeleted},
	contract.DeviceShutdown:     {contract.DeviceReady, contract.DeviceDeleted, contract.DeviceQuarantined},
	contract.DeviceQuarantined:  {contract.DeviceReady, contract.DeviceShutdown, contract.DeviceDeleted},
	contract.DeviceDeleted:      {},
}

// DeviceStates lists every state.
func DeviceStates() []contract.DeviceState {
	return []contract.DeviceState{
		contract.DeviceProvisioning, contract.DeviceReady, contract.DeviceLeased, contract.DeviceReclaiming,
		contract.DeviceShutdown, contract.DeviceQuarantined, contract.DeviceDeleted,
	}
}

// CanTransition reports whether a device may move from one state to another.
// Staying in the same state is always allowed.
func CanTransition(from, to contract.DeviceState) bool {
	if from == to {
		return true
	}
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// CheckTransition is CanTransition as an error, for the engine to refuse a
// move its own logic should never make.
func CheckTransition(id string, from, to contract.DeviceState) error {
	if !CanTransition(from, to) {
		return fmt.Errorf("device %s: illegal transition %s -> %s", id, from, to)
	}
	return nil
}

// Running reports whether a device in state s holds a running slot.
func Running(s contract.DeviceState) bool {
	switch s {
	case contract.DeviceReady, contract.DeviceLeased, contract.DeviceReclaiming, contract.DeviceQuarantined:
		return true
	}
	return false
}

package driver

import (
	"context"
	"fmt"

	"github.com/simlock/simlock/internal/ids"
)

// ProvenanceReader is what a driver offers when it marks the devices it
// creates, so that a device erased, replaced or tampered with outside
// simlock is told from one simlock left as it was.
//
// Each device carries one random token in two marks: a durable one, which
// an erase of the device leaves in place (beside the device's files), and
// an erasable one, which an erase takes away (inside the device's user
// data). The token is also kept in the device's driver data, which the core
// stores. The driver writes both marks when it creates the device and
// rewrites the erasable one after each clean of its own, so simlock's own
// erases never look like someone else's. Before each destructive call
// (Reclaim, Destroy, and any boot that wipes) it checks the durable mark
// and refuses, with *ProvenanceError, a device whose durable mark is not
// the token it recorded: simlock never wipes or deletes what it cannot
// prove is its own. Shutdown is not checked, as stopping loses nothing.
type ProvenanceReader interface {
	// Provenance reads dev's marks and changes nothing. dev is the device
	// as the core records it, with the address it runs at now (as
	// ListManaged reports it), or none when it does not run; a driver
	// that can read the erasable mark only from a running device (Android)
	// uses the address to reach it. A mark that is absent or unreadable
	// is "" in the result; an error means the marks could not be looked
	// at, and says nothing about the device.
	Provenance(ctx context.Context, dev Device) (Provenance, error)
}

// Provenance is what a device's marks say, beside the token its driver data
// records.
type Provenance struct {
	// Token is the token the device's driver data records; "" for a device
	// made before marks existed.
	Token string
	// Durable and Erasable are the tokens the two marks hold; "" for a
	// mark that is missing.
	Durable, Erasable string
	// ErasableReadable says the erasable mark could be looked at: an
	// Android device's only while it runs.
	ErasableReadable bool
}

// Drift is how a device's marks show it was changed outside simlock.
type Drift string

// The drifts. A device simlock created and left as it was has none.
const (
	DriftNone Drift = ""
	// DriftErased: the durable mark is simlock's and the erasable one is
	// gone: the device was erased (simctl erase, emulator -wipe-data)
	// outside simlock. It is still simlock's device.
	DriftErased Drift = "erased"
	// DriftMarkMismatch: a mark holds another token than the one
	// simlock recorded: the device was replaced, or its marks rewritten.
	DriftMarkMismatch Drift = "mark-mismatch"
	// DriftDurableMissing: the durable mark is gone, so nothing proves
	// the device is simlock's.
	DriftDurableMissing Drift = "durable-mark-missing"
)

// Drifts lists every drift but none, in the order findings name them.
func Drifts() []Drift { return []Drift{DriftErased, DriftMarkMismatch, DriftDurableMissing} }

// Drift classifies the marks. A device with no token recorded and no mark
// (one made before marks existed, not cleaned since) says nothing. The
// durable mark is judged first, since without it nothing else is evidence;
// an erasable mark that could not be read then says nothing either.
func (p Provenance) Drift() Drift {
	switch {
	case p.Token == "" && p.Durable == "" && p.Erasable == "":
		return DriftNone
	case p.Durable == "":
		return DriftDurableMissing
	case p.Token != "" && p.Durable != p.Token:
		return DriftMarkMismatch
	case !p.ErasableReadable:
		return DriftNone
	case p.Erasable == "":
		return DriftErased
	case p.Erasable != p.Durable:
		return DriftMarkMismatch
	}
	return DriftNone
}

// ProvenanceError is a destructive call a driver refused because the
// device's durable mark is not the token simlock recorded for it. Drivers
// return it inside a *CrashError.
type ProvenanceError struct {
	DeviceID string
	Drift    Drift
}

func (e *ProvenanceError) Error() string {
	return fmt.Sprintf("device %s carries no mark of simlock's (%s); refusing to wipe or delete what simlock cannot prove is its own", e.DeviceID, e.Drift)
}

// CheckDurable is the check before a destructive call: nil when token is
// "" (a device made before marks, which has nothing to check against) or
// durable is token, else the *ProvenanceError for deviceID.
func CheckDurable(deviceID, token, durable string) error {
	switch {
	case token == "" || durable == token:
		return nil
	case durable == "":
		return &ProvenanceError{DeviceID: deviceID, Drift: DriftDurableMissing}
	}
	return &ProvenanceError{DeviceID: deviceID, Drift: DriftMarkMismatch}
}

// NewMarkToken returns a fresh random token for a device's marks: 32 hex
// digits, which no two devices share.
func NewMarkToken() string {
	return ids.New("", ids.Long)
}

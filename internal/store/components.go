package store

import "github.com/simlock/simlock/internal/contract"

// ComponentRecord is the proof that simlock installed a component (an iOS
// runtime, an Android system image): only a component whose current
// receipt matches its record may be removed by simlock. The component
// installer writes and reads these through its Records port.
type ComponentRecord struct {
	Platform    contract.Platform
	Version     string
	Name        string
	Receipt     string
	InstalledAt int64
}

package driver

// FaultInjector is what a driver offers when its devices can be made to
// misbehave on purpose (crash, vanish, fail a boot or a reclaim, ...), so
// that crash recovery, quarantine and device loss can be seen without a
// real device. Only the demo driver offers it; the daemon's demo.inject
// operation refuses a device whose driver does not.
type FaultInjector interface {
	// InjectFault gives the device with this driver device id
	// (Device.ID, as Provision returned it) the named fault. It fails for
	// an unknown fault name and for a device the driver does not know.
	InjectFault(deviceID, fault string) error
}

package daemon

import (
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// demoInject makes a demo device misbehave at its next observation or
// operation, so crash recovery, quarantine and device loss can be seen
// without a real device.
func (d *Daemon) demoInject(in contract.DemoInjectInput) (contract.DemoInjectResult, error) {
	var dev *contract.Device
	for _, x := range d.engine.List(contract.ListDevices, nil, 0).Devices {
		if x.ID == in.DeviceID {
			dev = &x
			break
		}
	}
	if dev == nil {
		// Unknown, as any other device id the daemon does not have (the
		// exit-code table's UNKNOWN_DEVICE, exit 1), not a malformed input.
		return contract.DemoInjectResult{}, contract.Errorf(contract.CodeUnknownDevice, "no device %s", in.DeviceID).With("deviceId", in.DeviceID)
	}
	drv, ok := d.opts.Drivers[dev.Spec.Platform].(driver.FaultInjector)
	if !ok {
		return contract.DemoInjectResult{}, contract.Errorf(contract.CodeBadRequest,
			"device %s is served by the %s driver; faults can be injected only into the demo driver's devices", in.DeviceID, dev.Driver).With("field", "deviceId")
	}
	if err := drv.InjectFault(dev.DriverDeviceID, in.Fault); err != nil {
		return contract.DemoInjectResult{}, contract.Errorf(contract.CodeBadRequest, "%v", err).With("field", "deviceId")
	}
	d.log.Info("demo fault injected", "deviceId", in.DeviceID, "fault", in.Fault)
	return contract.DemoInjectResult{DeviceID: in.DeviceID, Fault: in.Fault, Injected: true}, nil
}

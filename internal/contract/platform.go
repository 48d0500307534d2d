package contract

import (
	"slices"
)

// Platform is a device platform.
type Platform string

// The platforms simlock serves.
const (
	PlatformIOS     Platform = "ios"
	PlatformAndroid Platform = "android"
)

// Platforms lists every platform in a fixed order.
func Platforms() []Platform { return []Platform{PlatformIOS, PlatformAndroid} }

// NumPlatforms is how many platforms there are.
const NumPlatforms = 2

// Index is p's place in Platforms, or -1 for an unknown platform.
func (p Platform) Index() int {
	switch p {
	case PlatformIOS:
		return 0
	case PlatformAndroid:
		return 1
	}
	return -1
}

// Valid reports whether p is a known platform.
func (p Platform) Valid() bool { return p == PlatformIOS || p == PlatformAndroid }

// DeviceClass is a kind of device a request may ask for instead of a model.
type DeviceClass string

// The device classes.
const (
	ClassPhone   DeviceClass = "phone"
	ClassTablet  DeviceClass = "tablet"
	ClassWatch   DeviceClass = "watch"
	ClassTV      DeviceClass = "tv"
	ClassVision  DeviceClass = "vision"
	ClassAuto    DeviceClass = "auto"
	ClassDesktop DeviceClass = "desktop"
)

// Classes lists the device classes.
func Classes() []DeviceClass {
	return []DeviceClass{ClassPhone, ClassTablet, ClassWatch, ClassTV, ClassVision, ClassAuto, ClassDesktop}
}

// Valid reports whether c is a known class.
func (c DeviceClass) Valid() bool { return slices.Contains(Classes(), c) }

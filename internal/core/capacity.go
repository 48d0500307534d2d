package core

import (
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
)

// osRAMReserve is what the resource strategy leaves to the operating system.
const osRAMReserve = 4 << 30

// Host is what the resource strategy reads from the machine.
type Host struct {
	CPUs     int
	RAMBytes int64
}

// PlatformLimits bounds one platform.
type PlatformLimits struct {
	MaxDevices int `json:"maxDevices"`
	MaxRunning int `json:"maxRunning"`
}

// Limits bounds the whole machine.
type Limits struct {
	Strategy   string                               `json:"strategy"`
	MaxRunning int                                  `json:"maxRunning"`
	Platforms  map[contract.Platform]PlatformLimits `json:"platforms"`
	RAM        *RAMBudget                           `json:"ramBudget,omitempty"`
}

// RAMBudget is the resource strategy's memory limit.
type RAMBudget struct {
	LimitBytes int64                       `json:"limitBytes"`
	PerDevice  map[contract.Platform]int64 `json:"perDeviceBytes"`
	// PerSlimDevice is what a slim device of the platform is assumed to
	// use, where it differs from PerDevice.
	PerSlimDevice map[contract.Platform]int64 `json:"perSlimDeviceBytes,omitempty"`
}

// Bytes is what one device of p, slim or not, takes of the budget.
func (b *RAMBudget) Bytes(p contract.Platform, slim bool) int64 {
	if n, ok := b.PerSlimDevice[p]; ok && slim {
		return n
	}
	return b.PerDevice[p]
}

// LimitsFrom derives limits from config and, for the resource strategy, the
// host's CPUs and RAM.
func LimitsFrom(cfg *config.Config, host Host) Limits {
	if cfg.String("capacity.strategy") == "fixed" {
		global := int(cfg.Int("capacity.config.maxRunning"))
		l := Limits{Strategy: "fixed", MaxRunning: global, Platforms: map[contract.Platform]PlatformLimits{}}
		for _, p := range contract.Platforms() {
			run := intOr(cfg, "capacity.config."+string(p)+".maxRunning", global)
			l.Platforms[p] = PlatformLimits{
				MaxRunning: run,
				MaxDevices: intOr(cfg, "capacity.config."+string(p)+".maxDevices", run),
			}
		}
		return l
	}
	cpus := max(host.CPUs, 1)
	ramGiB := int(host.RAMBytes >> 30)
	iosDevices := intOr(cfg, "capacity.config.limits.ios.maxDevices", max(1, cpus/2))
	androidDevices := intOr(cfg, "capacity.config.limits.android.maxDevices", max(1, min(cpus/4, ramGiB/8)))
	l := Limits{Strategy: "resource", Platforms: map[contract.Platform]PlatformLimits{
		contract.PlatformIOS: {MaxDevices: iosDevices,
			MaxRunning: intOr(cfg, "capacity.config.limits.ios.maxRunning", iosDevices)},
		contract.PlatformAndroid: {MaxDevices: androidDevices,
			MaxRunning: intOr(cfg, "capacity.config.limits.android.maxRunning", androidDevices)},
	}}
	l.MaxRunning = intOr(cfg, "capacity.config.limits.maxRunning", iosDevices+androidDevices)
	if host.RAMBytes <= 0 {
		return l // RAM unknown: no budget rather than a budget of nothing
	}
	l.RAM = &RAMBudget{
		LimitBytes: max(host.RAMBytes-osRAMReserve, 0),
		PerDevice: map[contract.Platform]int64{
			contract.PlatformIOS:     cfg.Int("capacity.config.ramBudget.iosBytesPerDevice"),
			contract.PlatformAndroid: cfg.Int("capacity.config.ramBudget.androidBytesPerDevice"),
		},
	}
	if n, ok := cfg.IntSet("capacity.config.ramBudget.iosSlimBytesPerDevice"); ok {
		l.RAM.PerSlimDevice = map[contract.Platform]int64{contract.PlatformIOS: n}
	}
	return l
}

func intOr(cfg *config.Config, key string, def int) int {
	if v, ok := cfg.IntSet(key); ok {
		return int(v)
	}
	return def
}

// Slot is one device as capacity sees it.
type Slot struct {
	Platform contract.Platform
	State    contract.DeviceState
	// Reserved marks a device whose boot or creation is in flight: it will
	// hold a running slot, so it counts as one now.
	Reserved bool
	// Releasing marks a device being shut down to free its slot for a
	// request; the slot is already promised, so it no longer counts.
	Releasing bool
	// Slim marks a device made slim, which the RAM budget may size
	// apart.
	Slim bool
}

// PerPlatform is a count for each platform. It is comparable by value.
type PerPlatform [contract.NumPlatforms]int

// Of is p's count (0 for an unknown platform).
func (c PerPlatform) Of(p contract.Platform) int {
	if i := p.Index(); i >= 0 {
		return c[i]
	}
	return 0
}

// Add adds n to p's count.
func (c *PerPlatform) Add(p contract.Platform, n int) {
	if i := p.Index(); i >= 0 {
		c[i] += n
	}
}

// Usage is what the current devices take of the limits. It is comparable
// by value, so a change is seen without building a report.
type Usage struct {
	Running  PerPlatform
	Reserved PerPlatform
	Devices  PerPlatform
	RAMBytes int64
}

// Add counts one slot in (n = 1) or out (n = -1). The engine keeps its
// usage by calling it on every change of a device's state or claim;
// Measure recounts from scratch with the same rule.
func (u *Usage) Add(l Limits, s Slot, n int) {
	if s.State == contract.DeviceDeleted {
		return
	}
	u.Devices.Add(s.Platform, n)
	if l.RAM != nil {
		u.RAMBytes += int64(n) * l.RAM.Bytes(s.Platform, s.Slim)
	}
	switch {
	case s.Releasing:
	case s.Reserved:
		u.Reserved.Add(s.Platform, n)
	case Running(s.State):
		u.Running.Add(s.Platform, n)
	}
}

// Measure counts slots against limits.
func Measure(l Limits, slots []Slot) Usage {
	var u Usage
	for _, s := range slots {
		u.Add(l, s, 1)
	}
	return u
}

// TotalRunning is the devices running or reserved to run, all platforms.
func (u Usage) TotalRunning() int {
	n := 0
	for i := range contract.NumPlatforms {
		n += u.Running[i] + u.Reserved[i]
	}
	return n
}

// Block says why a start must wait.
type Block string

// The reasons a start is refused.
const (
	BlockNone            Block = ""
	BlockGlobalRunning   Block = "global-running-limit"
	BlockPlatformRunning Block = "platform-running-limit"
	BlockDeviceLimit     Block = "device-limit"
	BlockRAM             Block = "ram-budget"
)

// Global reports whether the block concerns every platform.
func (b Block) Global() bool { return b == BlockGlobalRunning || b == BlockRAM }

// CanStart says whether one more device of p may start running.
func CanStart(l Limits, u Usage, p contract.Platform) Block {
	if u.TotalRunning() >= l.MaxRunning {
		return BlockGlobalRunning
	}
	if u.Running.Of(p)+u.Reserved.Of(p) >= l.Platforms[p].MaxRunning {
		return BlockPlatformRunning
	}
	return BlockNone
}

// CanCreate says whether one more device of p, slim or not, may be created
// (it will also need CanStart).
func CanCreate(l Limits, u Usage, p contract.Platform, slim bool) Block {
	if u.Devices.Of(p) >= l.Platforms[p].MaxDevices {
		return BlockDeviceLimit
	}
	if l.RAM != nil && u.RAMBytes+l.RAM.Bytes(p, slim) > l.RAM.LimitBytes {
		return BlockRAM
	}
	return BlockNone
}

// Report summarises usage against limits; warm counts idle ready devices.
func Report(l Limits, u Usage, warm PerPlatform) contract.Capacity {
	c := contract.Capacity{Strategy: l.Strategy, Platforms: map[contract.Platform]contract.PlatformCapacity{}}
	c.Global.MaxRunning = l.MaxRunning
	for _, p := range contract.Platforms() {
		pl := l.Platforms[p]
		c.Platforms[p] = contract.PlatformCapacity{
			Running: u.Running.Of(p), Reserved: u.Reserved.Of(p), MaxRunning: pl.MaxRunning,
			Devices: u.Devices.Of(p), MaxDevices: pl.MaxDevices, Warm: warm.Of(p),
		}
		if l.RAM != nil {
			pc := c.Platforms[p]
			pc.AtRAMBudget = u.RAMBytes+min(l.RAM.Bytes(p, false), l.RAM.Bytes(p, true)) > l.RAM.LimitBytes
			c.Platforms[p] = pc
		}
		c.Global.Running += u.Running.Of(p)
		c.Global.Reserved += u.Reserved.Of(p)
		c.Global.Warm += warm.Of(p)
	}
	if l.RAM != nil {
		c.RAMBudget = &contract.RAMCapacity{LimitBytes: l.RAM.LimitBytes, UsedBytes: u.RAMBytes, OverLimit: u.RAMBytes > l.RAM.LimitBytes}
	}
	return c
}

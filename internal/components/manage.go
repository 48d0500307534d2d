package components

import (
	"context"
	"sort"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// DevicesOn counts simlock's devices on a runtime (any state).
type DevicesOn func(p contract.Platform, version string) []string

// List lists the installed components of platform p (both when ""), each
// marked owned when simlock installed it (its record's receipt matches).
func (in *Installer) List(ctx context.Context, p contract.Platform, devicesOn DevicesOn) ([]contract.Component, error) {
	owned, err := in.owned(ctx)
	if err != nil {
		return nil, err
	}
	out := []contract.Component{}
	for _, plat := range contract.Platforms() {
		drv, ok := in.opts.Drivers[plat]
		if !ok || (p != "" && p != plat) {
			continue
		}
		infos, err := drv.ListComponents(ctx)
		if err != nil {
			return nil, contract.Errorf(contract.CodeInternal, "list %s components: %v", plat, err)
		}
		for _, info := range infos {
			c := contract.Component{Platform: plat, Version: info.Version, Name: info.Name, SizeBytes: info.SizeBytes, ForeignDevices: info.ForeignDevices}
			if rec, ok := owned[key(plat, info.Version)]; ok && rec.Receipt == info.Receipt {
				c.Owned, c.InstalledAt = true, rec.InstalledAt
			}
			if devicesOn != nil {
				c.Devices = len(devicesOn(plat, info.Version))
			}
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Platform != out[j].Platform {
			return out[i].Platform < out[j].Platform
		}
		return out[i].Version > out[j].Version
	})
	return out, nil
}

func key(p contract.Platform, version string) string { return string(p) + "/" + version }

func (in *Installer) owned(ctx context.Context) (map[string]Record, error) {
	out := map[string]Record{}
	if in.opts.Records == nil {
		return out, nil
	}
	recs, err := in.opts.Records.Components(ctx)
	if err != nil {
		return nil, contract.Errorf(contract.CodeInternal, "read component records: %v", err)
	}
	for _, r := range recs {
		out[key(r.Platform, r.Version)] = r
	}
	return out, nil
}

// Hold marks a runtime as being removed so no new device is made on it,
// after checking no simlock device uses it; release lifts the mark.
type Hold func(p contract.Platform, version string) (release func(), err error)

// Remove deletes a component simlock installed: one whose record matches
// its current receipt, that no device (simlock's or another's) uses, on a
// platform with no install running or waiting. DryRun checks all of that
// and removes nothing.
func (in *Installer) Remove(ctx context.Context, req contract.ComponentRemoveInput, hold Hold) (contract.ComponentRemoveResult, error) {
	drv, ok := in.opts.Drivers[req.Platform]
	if !ok {
		return contract.ComponentRemoveResult{}, contract.Errorf(contract.CodeNoDriver, "no %s driver here manages components", req.Platform).With("platform", req.Platform)
	}
	info, found, err := drv.FindComponent(ctx, req.Version)
	if err != nil {
		return contract.ComponentRemoveResult{}, driver.ContractError(err)
	}
	if !found {
		return contract.ComponentRemoveResult{}, contract.Errorf(contract.CodeRuntimeMissing, "no %s component %s is installed", req.Platform, req.Version).
			With("platform", req.Platform).With("osVersion", req.Version).With("downloadable", false)
	}
	owned, err := in.owned(ctx)
	if err != nil {
		return contract.ComponentRemoveResult{}, err
	}
	if rec, ok := owned[key(req.Platform, info.Version)]; !ok || rec.Receipt != info.Receipt {
		return contract.ComponentRemoveResult{}, contract.Errorf(contract.CodeComponentNotOwned,
			"%s was not installed by simlock (or was reinstalled since); remove it with the platform's own tools", info.Name).
			With("platform", req.Platform).With("version", info.Version)
	}
	if in.Busy(req.Platform) {
		return contract.ComponentRemoveResult{}, contract.Errorf(contract.CodeComponentBusy, "an %s install is running or waiting; try again when it is done", req.Platform).
			With("platform", req.Platform)
	}
	if info.ForeignDevices > 0 {
		return contract.ComponentRemoveResult{}, contract.Errorf(contract.CodeComponentInUse, "%d device(s) outside simlock use %s", info.ForeignDevices, info.Name).
			With("devices", []string{}).With("foreignDevices", info.ForeignDevices)
	}
	release, err := hold(req.Platform, info.Version)
	if err != nil {
		return contract.ComponentRemoveResult{}, err
	}
	defer release()
	res := contract.ComponentRemoveResult{Platform: req.Platform, Version: info.Version, Name: info.Name, DryRun: req.DryRun}
	if req.DryRun {
		return res, nil
	}
	if err := drv.RemoveComponent(ctx, info); err != nil {
		return contract.ComponentRemoveResult{}, driver.ContractError(err)
	}
	if err := in.opts.Records.DeleteComponent(ctx, req.Platform, info.Version); err != nil {
		in.log.Error("could not delete a component record", "platform", req.Platform, "version", info.Version, "err", err)
	}
	in.opts.Emit(contract.EvComponentRemoved, map[string]any{"platform": req.Platform, "component": req.Version, "version": info.Version, "name": info.Name})
	in.opts.Emit(contract.EvCatalogChanged, map[string]any{"platform": req.Platform, "component": req.Version, "cause": contract.EvComponentRemoved})
	res.Removed = true
	return res, nil
}

package apiview

import "github.com/simlock/simlock/internal/contract"

// LeaseView is a lease as the HTTP API shows it: the lease and its device in
// one flat object.
type LeaseView struct {
	ID          string            `json:"id"`
	RequestID   string            `json:"requestId,omitempty"`
	RequesterID string            `json:"requesterId"`
	Platform    contract.Platform `json:"platform"`
	Device      string            `json:"device"`
	OS          string            `json:"os"`
	UDID        string            `json:"udid"`
	DeviceID    string            `json:"deviceId"`
	Address     string            `json:"address,omitempty"`
	CreatedAt   string            `json:"createdAt"`
	ExpiresAt   string            `json:"expiresAt"`
	TTLMs       int64             `json:"ttlMs"`
	// Mode is how the device runs: slim while its slim pass is in
	// effect, full otherwise.
	Mode contract.DeviceMode `json:"mode"`
	// DataPlane is reserved for remote device access; always null here.
	DataPlane   *struct{}         `json:"dataPlane"`
	Environment map[string]string `json:"environment,omitempty"`
	// IDChosenByRequester: the request chose the lease's id (leaseId).
	IDChosenByRequester bool `json:"idChosenByRequester,omitempty"`
	// Key is the lease's unique key when its id was chosen (unique only
	// within its owner): an operator names one of two owners' leases of
	// one id by it.
	Key string `json:"key,omitempty"`
	// Active is false when the view comes from a grant whose lease has
	// ended; it is left out while the lease is held.
	Active *bool `json:"active,omitempty"`
	// Worker names the worker the lease is on, through a gateway.
	Worker *contract.WorkerRef `json:"worker,omitempty"`
	// Unreachable is true, through a gateway, when the view comes from a
	// grant whose worker is not connected: the lease is held, and calls on
	// it answer WORKER_UNREACHABLE until the worker is back.
	Unreachable bool `json:"unreachable,omitempty"`
	// Source and Timing, only in a request's lease, are its grant's: where
	// the device came from (warm, started, made) and the driver's
	// estimates, as the socket's grant says them.
	Source contract.GrantSource `json:"source,omitempty"`
	Timing *contract.Timing     `json:"timing,omitempty"`
}

// RequestView is a lease request as the HTTP API shows it.
type RequestView struct {
	ID            string `json:"id"`
	RequesterID   string `json:"requesterId"`
	State         string `json:"state"`
	QueuePosition int    `json:"queuePosition,omitempty"`
	// Wait is what the first in line waits for (see contract.QueueWait).
	Wait  *contract.QueueWait `json:"wait,omitempty"`
	EtaMs *int64              `json:"etaMs,omitempty"`
	// Component, Waiting and Percent describe the downloading state.
	Component string `json:"component,omitempty"`
	Waiting   *bool  `json:"waiting,omitempty"`
	Percent   *int   `json:"percent,omitempty"`
	// BytesDone and BytesTotal are the download's size so far and in
	// all, when the installer prints them.
	BytesDone  int64                `json:"bytesDone,omitempty"`
	BytesTotal int64                `json:"bytesTotal,omitempty"`
	CreatedAt  string               `json:"createdAt"`
	SettledAt  string               `json:"settledAt,omitempty"`
	Spec       contract.RequestSpec `json:"spec"`
	Lease      *LeaseView           `json:"lease,omitempty"`
	Error      *contract.Error      `json:"error,omitempty"`
}

// The wrappers some answers put their record in.
type (
	RequestEnvelope struct {
		Request RequestView `json:"request"`
	}
	LeaseEnvelope struct {
		Lease LeaseView `json:"lease"`
	}
)

// RenewView answers POST /v1/leases/{id}/renew. Notices are what befell
// the lease's device since the lease was last renewed and that no stream
// of it heard (device-unhealthy, device-recovered), oldest first; always a
// list.
type RenewView struct {
	LeaseID   string   `json:"leaseId"`
	ExpiresAt string   `json:"expiresAt"`
	TTLMs     int64    `json:"ttlMs"`
	Notices   []string `json:"notices"`
}

// ReleaseView answers DELETE /v1/leases/{id}.
type ReleaseView struct {
	Released bool   `json:"released"`
	LeaseID  string `json:"leaseId"`
	Device   struct {
		ID    string               `json:"id"`
		State contract.DeviceState `json:"state"`
	} `json:"device"`
}

// LeaseLostView is the data of a lease stream's lease_lost event.
type LeaseLostView struct {
	LeaseID  string `json:"leaseId"`
	DeviceID string `json:"deviceId"`
	Reason   string `json:"reason"`
}

// DeviceNotice is the data of a lease stream's device_unhealthy and
// device_recovered events (attempts only on the second). Its fields are in
// the order of their names, as the stream has always sent them.
type DeviceNotice struct {
	Attempts *int   `json:"attempts,omitempty"`
	DeviceID string `json:"deviceId"`
	LeaseID  string `json:"leaseId"`
}

// Progress is the step a request view shows, as the socket's progress
// pushes carry it, so one renderer draws both; ok is false once the
// request has settled (granted, failed or cancelled).
func (v RequestView) Progress() (p contract.LeaseProgress, ok bool) {
	p.Stage = contract.Stage(v.State)
	switch p.Stage {
	case contract.StageQueued:
		p.QueuePosition, p.Wait = v.QueuePosition, v.Wait
	case contract.StageProvisioning, contract.StageBooting, contract.StageReclaiming:
		if v.EtaMs != nil {
			p.EtaMs = *v.EtaMs
		}
	case contract.StageDownloading:
		p.Component, p.Percent = v.Component, v.Percent
		p.Waiting = v.Waiting != nil && *v.Waiting
		p.BytesDone, p.BytesTotal = v.BytesDone, v.BytesTotal
	default:
		return contract.LeaseProgress{}, false
	}
	return p, true
}

// Grant is the grant a granted request's lease view stands for, with rec,
// the lease's record, in place of what the view flattens. The view does not
// carry the grant's timing or source; they are left zero.
func (v LeaseView) Grant(rec contract.LeaseRecord) contract.LeaseGrant {
	return contract.LeaseGrant{
		Device: contract.GrantDevice{
			ID:             v.DeviceID,
			Spec:           contract.DeviceSpec{Platform: v.Platform, Model: v.Device, OSVersion: v.OS},
			DriverDeviceID: v.UDID,
			Address:        v.Address,
			Mode:           v.Mode,
		},
		Lease:       rec,
		Environment: v.Environment,
		RequestID:   v.RequestID,
		Source:      v.Source,
		Timing:      timingOf(v.Timing),
	}
}

func timingOf(t *contract.Timing) contract.Timing {
	if t == nil {
		return contract.Timing{}
	}
	return *t
}

package httpapi

import (
	"context"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// isoTime formats epoch ms the way the HTTP views show times: RFC 3339 in
// UTC with milliseconds, so that every time has the same width.
func isoTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// leaseView is a lease as the HTTP API shows it: the lease and its device in
// one flat object.
type leaseView struct {
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
}

func leaseViewFromGet(g contract.LeaseGetResult) leaseView {
	mode := contract.DeviceModeFull
	if g.Device.Slimmed {
		mode = contract.DeviceModeSlim
	}
	return newLeaseView(g.Lease, g.RequestID, g.Device.Spec, g.Device.DriverDeviceID, g.Device.Address, mode)
}

func leaseViewFromGrant(g contract.LeaseGrant) leaseView {
	mode := g.Device.Mode
	if mode == "" {
		// A grant that names no mode (a worker's from before modes) is of
		// a full device, as a spec without one is.
		mode = contract.DeviceModeFull
	}
	v := newLeaseView(g.Lease, g.RequestID, g.Device.Spec, g.Device.DriverDeviceID, g.Device.Address, mode)
	v.Environment = g.Environment
	return v
}

func newLeaseView(l contract.LeaseRecord, requestID string, spec contract.DeviceSpec, udid, address string, mode contract.DeviceMode) leaseView {
	return leaseView{
		ID:                  l.ID,
		RequestID:           requestID,
		RequesterID:         l.RequesterID,
		Platform:            spec.Platform,
		Device:              spec.Model,
		OS:                  spec.OSVersion,
		UDID:                udid,
		DeviceID:            l.DeviceID,
		Address:             address,
		CreatedAt:           isoTime(l.GrantedAt),
		ExpiresAt:           isoTime(l.TTLDeadline),
		TTLMs:               l.TTLMs,
		IDChosenByRequester: l.IDChosenByRequester,
		Key:                 l.Key,
		Mode:                mode,
		Worker:              l.Worker,
	}
}

// requestView is a lease request as the HTTP API shows it.
type requestView struct {
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
	Lease      *leaseView           `json:"lease,omitempty"`
	Error      *contract.Error      `json:"error,omitempty"`
}

// requestView builds the view of st. A granted request's lease is looked up
// again because the grant is a snapshot: the lease may have been renewed
// (new deadline) or may have ended since.
func (s *Server) requestView(ctx context.Context, tok contract.TokenRecord, st contract.LeaseRequestStatus) requestView {
	rec := st.Request
	v := requestView{
		ID:          rec.ID,
		RequesterID: rec.RequesterID,
		State:       st.Phase(),
		CreatedAt:   isoTime(rec.CreatedAt),
		Spec:        rec.Spec,
	}
	if rec.SettledAt != 0 {
		v.SettledAt = isoTime(rec.SettledAt)
	}
	switch contract.Stage(v.State) {
	case contract.StageQueued:
		v.QueuePosition = rec.QueuePosition
		if st.Progress != nil && st.Progress.Stage == contract.StageQueued && st.Progress.QueuePosition > 0 {
			v.QueuePosition, v.Wait = st.Progress.QueuePosition, st.Progress.Wait
		}
	case contract.StageProvisioning, contract.StageBooting, contract.StageReclaiming:
		if st.Progress != nil {
			eta := st.Progress.EtaMs
			v.EtaMs = &eta
		}
	case contract.StageDownloading:
		if p := st.Progress; p != nil {
			waiting := p.Waiting
			v.Component, v.Waiting, v.Percent = p.Component, &waiting, p.Percent
			v.BytesDone, v.BytesTotal = p.BytesDone, p.BytesTotal
		}
	}
	switch rec.State {
	case contract.RequestGranted:
		v.Lease = s.grantedLease(ctx, tok, rec)
	case contract.RequestFailed, contract.RequestCancelled:
		v.Error = rec.Error
	}
	return v
}

// grantedLease is the lease view of a granted request: the grant with the
// lease's current deadline while it is held, marked inactive once it ended.
func (s *Server) grantedLease(ctx context.Context, tok contract.TokenRecord, rec contract.LeaseRequestRecord) *leaseView {
	// By the grant's key: a chosen id may name a later lease of the same
	// owner by now, or, to an operator, another owner's.
	leaseID := rec.LeaseID
	if rec.Grant != nil {
		leaseID = rec.Grant.Lease.UniqueKey()
	}
	if leaseID == "" {
		if rec.Grant == nil {
			return nil
		}
		v := leaseViewFromGrant(*rec.Grant)
		return &v
	}
	cur, err := callAs[contract.LeaseGetResult](ctx, s, tok, contract.OpLeaseGet, contract.LeaseIDInput{LeaseID: leaseID})
	switch {
	case err == nil && rec.Grant != nil:
		v := leaseViewFromGrant(*rec.Grant)
		v.ExpiresAt = isoTime(cur.Lease.TTLDeadline)
		v.TTLMs = cur.Lease.TTLMs
		return &v
	case err == nil:
		v := leaseViewFromGet(cur)
		return &v
	case rec.Grant == nil:
		s.log.Warn("could not read a granted request's lease", "requestId", rec.ID, "leaseId", leaseID, "err", err)
		return nil
	}
	v := leaseViewFromGrant(*rec.Grant)
	switch code := asError(err).Code; {
	case code == contract.CodeUnknownLease:
		inactive := false
		v.Active = &inactive
	case code == contract.CodeWorkerUnreachable:
		v.Unreachable = true
	case ctx.Err() == nil:
		// The grant is still a truthful answer; the caller asked about the
		// request, so a failed lookup of its lease does not fail it.
		s.log.Warn("could not read a granted request's lease", "requestId", rec.ID, "leaseId", leaseID, "err", err)
	}
	return &v
}

// requestSummary is one open request in GET /v1/lease-requests.
// failedRequest is one failed request as GET /v1/lease-requests?state=failed
// lists it.
type failedRequest struct {
	ID          string               `json:"id"`
	RequesterID string               `json:"requesterId"`
	Spec        contract.RequestSpec `json:"spec"`
	CreatedAt   int64                `json:"createdAt"`
	SettledAt   int64                `json:"settledAt"`
	Error       *contract.Error      `json:"error,omitempty"`
	WorkerID    string               `json:"workerId,omitempty"`
}

type requestSummary struct {
	ID            string                `json:"id"`
	RequesterID   string                `json:"requesterId"`
	Spec          contract.RequestSpec  `json:"spec"`
	CreatedAt     int64                 `json:"createdAt"`
	Stage         contract.RequestState `json:"stage"`
	QueuePosition int                   `json:"queuePosition,omitempty"`
}

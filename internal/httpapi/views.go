package httpapi

import (
	"context"

	"github.com/simlock/simlock/internal/apiview"
	"github.com/simlock/simlock/internal/contract"
)

// isoTime formats epoch ms the way the HTTP views show times: RFC 3339 in
// UTC with milliseconds, so that every time has the same width.
func isoTime(ms int64) string {
	return apiview.IsoTime(ms)
}

// The views the routes answer with live in apiview, which the typed client
// reads them with too.
type (
	leaseView   = apiview.LeaseView
	requestView = apiview.RequestView
)

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
	timing := g.Timing
	v.Environment, v.Source, v.Timing = g.Environment, g.Source, &timing
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

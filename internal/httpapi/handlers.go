package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	// Passed through as raw JSON so that fields this package does not know
	// reach the client too.
	summary, err := queryBool(r, "summary")
	if err != nil {
		return err
	}
	st, err := callAs[json.RawMessage](r.Context(), s, tok, contract.OpStatusGet, contract.StatusGetInput{Summary: summary})
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, st)
	return nil
}

// queryBool reads a true/false query parameter; absent is false.
func queryBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, contract.BadRequest(name, "must be true or false, got %q", v)
	}
	return b, nil
}

func (s *Server) getCatalog(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	in := contract.CatalogGetInput{Platform: contract.Platform(r.URL.Query().Get("platform"))}
	if err := in.Validate(); err != nil {
		return err
	}
	res, err := callAs[contract.CatalogResult](r.Context(), s, tok, contract.OpCatalogGet, in)
	if err != nil {
		return err
	}
	if res.Platforms == nil {
		res.Platforms = []contract.Catalog{}
	}
	s.writeJSON(w, http.StatusOK, res)
	return nil
}

// leaseRequestBody is the body of POST /v1/lease-requests.
type leaseRequestBody struct {
	Platform contract.Platform    `json:"platform"`
	Device   string               `json:"device,omitempty"`
	Class    contract.DeviceClass `json:"class,omitempty"`
	OS       string               `json:"os,omitempty"`
	ImageTag string               `json:"imageTag,omitempty"`
	// Mode is slim or full; omitted, the daemon's ios.defaultMode.
	Mode      contract.DeviceMode `json:"mode,omitempty"`
	TTLMs     int64               `json:"ttlMs,omitempty"`
	TimeoutMs int64               `json:"timeoutMs,omitempty"`
	NoWait    bool                `json:"noWait,omitempty"`
	// AllowDownload lets a missing runtime be downloaded (within
	// downloads.policy); the request then shows the downloading state.
	AllowDownload bool `json:"allowDownload,omitempty"`
	// LeaseID is the id the lease is to have, chosen by the client.
	LeaseID string `json:"leaseId,omitempty"`
}

// leaseRequestField maps a contract field name to the HTTP one, so that
// errors name what the client sent.
func leaseRequestField(name string) string {
	switch name {
	case "model":
		return "device"
	case "osVersion":
		return "os"
	case "idempotencyKey":
		return "Idempotency-Key"
	}
	return name
}

func (b *leaseRequestBody) input(idempotencyKey string) contract.LeaseRequestInput {
	return contract.LeaseRequestInput{
		Platform:       b.Platform,
		Model:          b.Device,
		Class:          b.Class,
		OSVersion:      b.OS,
		ImageTag:       b.ImageTag,
		Mode:           b.Mode,
		TTLMs:          b.TTLMs,
		TimeoutMs:      b.TimeoutMs,
		NoWait:         b.NoWait,
		AllowDownload:  b.AllowDownload,
		IdempotencyKey: idempotencyKey,
		LeaseID:        b.LeaseID,
	}
}

// Validate checks the body with the contract's rules, under the HTTP names.
func (b *leaseRequestBody) Validate() error {
	in := b.input("")
	return renameFields(in.Validate(), leaseRequestField)
}

// maxIdempotencyKeyLen bounds the Idempotency-Key header.
const maxIdempotencyKeyLen = 200

// idempotencyKey reads the optional Idempotency-Key header.
func idempotencyKey(h http.Header) (string, error) {
	vals := h.Values("Idempotency-Key")
	if len(vals) == 0 {
		return "", nil
	}
	bad := func(format string, args ...any) error {
		return contract.BadRequest("Idempotency-Key", format, args...)
	}
	if len(vals) > 1 {
		return "", bad("give the header once")
	}
	key := vals[0]
	if key == "" || len(key) > maxIdempotencyKeyLen {
		return "", bad("must be 1 to %d characters, got %d", maxIdempotencyKeyLen, len(key))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", bad("must be printable ASCII")
		}
	}
	return key, nil
}

func (s *Server) createLeaseRequest(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	key, err := idempotencyKey(r.Header)
	if err != nil {
		return err
	}
	var body leaseRequestBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	in := body.input(key)
	if err := renameFields(in.Validate(), leaseRequestField); err != nil {
		return err
	}
	st, err := s.be.Call(r.Context(), tok, contract.OpLeaseRequestCreate, in, nil)
	if err != nil {
		return renameFields(err, leaseRequestField)
	}
	status, err := convert[contract.LeaseRequestStatus](st)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/lease-requests/"+url.PathEscape(status.Request.ID))
	s.writeJSON(w, http.StatusCreated, map[string]any{"request": s.requestView(r.Context(), tok, status)})
	return nil
}

// maxWaitSeconds bounds ?wait= on GET /v1/lease-requests/{id}.
const maxWaitSeconds = contract.MaxRequestWaitMs / 1000

func (s *Server) getLeaseRequest(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	id := r.PathValue("id")
	wait := 0
	if raw := r.URL.Query().Get("wait"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 {
			return contract.BadRequest("wait", "must be a whole number of seconds from 0 to %d, got %q", maxWaitSeconds, raw)
		}
		wait = min(n, maxWaitSeconds)
	}
	in := contract.LeaseRequestGetInput{RequestID: id}
	if err := in.Validate(); err != nil {
		return err
	}
	st, err := callAs[contract.LeaseRequestStatus](r.Context(), s, tok, contract.OpLeaseRequestGet, in)
	if err != nil {
		return hideRequest(tok, err, id)
	}
	if wait > 0 && !st.Request.State.Terminal() {
		in = contract.LeaseRequestGetInput{RequestID: id, AfterRev: st.Rev, WaitMs: int64(wait) * 1000}
		st, err = callAs[contract.LeaseRequestStatus](r.Context(), s, tok, contract.OpLeaseRequestGet, in)
		if err != nil {
			return hideRequest(tok, err, id)
		}
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"request": s.requestView(r.Context(), tok, st)})
	return nil
}

func (s *Server) cancelLeaseRequest(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	id := r.PathValue("id")
	in := contract.LeaseCancelInput{RequestID: id}
	if err := in.Validate(); err != nil {
		return err
	}
	res, err := callAs[contract.LeaseCancelResult](r.Context(), s, tok, contract.OpLeaseCancel, in)
	if err != nil {
		return hideRequest(tok, err, id)
	}
	switch res.Outcome {
	case contract.CancelCancelled:
		w.WriteHeader(http.StatusNoContent)
		return nil
	case contract.CancelNotFound:
		return contract.Errorf(contract.CodeUnknownLeaseRequest, "no lease request %s", id).With("requestId", id)
	case contract.CancelNotCancellable:
		if res.LeaseID != "" {
			return contract.Errorf(contract.CodeRequestNotCancellable,
				"lease request %s was already granted as lease %s; release the lease instead", id, res.LeaseID).
				With("requestId", id).With("leaseId", res.LeaseID)
		}
		return contract.Errorf(contract.CodeRequestNotCancellable,
			"lease request %s can no longer be cancelled: device work for it has started or it has already settled", id).
			With("requestId", id)
	}
	return contract.Errorf(contract.CodeInternal, "lease.cancel answered an unknown outcome %q", res.Outcome)
}

func (s *Server) listLeaseRequests(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	in := contract.ListGetInput{Kind: contract.ListRequests}
	switch state := r.URL.Query().Get("state"); state {
	case "", "open":
	case "failed":
		return s.listFailedRequests(w, r, tok)
	default:
		return contract.BadRequest("state", "must be open or failed, got %q", state)
	}
	res, err := callAs[contract.ListGetResult](r.Context(), s, tok, contract.OpListGet, in)
	if err != nil {
		return err
	}
	out := make([]requestSummary, 0, len(res.Requests))
	for _, rec := range res.Requests {
		out = append(out, requestSummary{
			ID:            rec.ID,
			RequesterID:   rec.RequesterID,
			Spec:          rec.Spec,
			CreatedAt:     rec.CreatedAt,
			Stage:         rec.State,
			QueuePosition: rec.QueuePosition,
		})
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"requests": out})
	return nil
}

// listFailedRequests serves GET /v1/lease-requests?state=failed: the
// requests that failed lately, newest first, each with its error.
func (s *Server) listFailedRequests(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	res, err := callAs[contract.ListGetResult](r.Context(), s, tok, contract.OpListGet, contract.ListGetInput{Kind: contract.ListFailedRequests})
	if err != nil {
		return err
	}
	out := make([]failedRequest, 0, len(res.Requests))
	for _, rec := range res.Requests {
		out = append(out, failedRequest{ID: rec.ID, RequesterID: rec.RequesterID, Spec: rec.Spec, CreatedAt: rec.CreatedAt,
			SettledAt: rec.SettledAt, Error: rec.Error, WorkerID: rec.WorkerID})
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"requests": out})
	return nil
}

func (s *Server) listLeases(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	res, err := callAs[contract.LeaseListResult](r.Context(), s, tok, contract.OpLeaseList, contract.Empty{})
	if err != nil {
		return err
	}
	if res.Leases == nil {
		res.Leases = []contract.LeaseRecord{}
	}
	s.writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) getLease(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	id := r.PathValue("id")
	res, err := callAs[contract.LeaseGetResult](r.Context(), s, tok, contract.OpLeaseGet, contract.LeaseIDInput{LeaseID: id})
	if err != nil {
		return hideLease(tok, err, id)
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"lease": leaseViewFromGet(res)})
	return nil
}

// renewBody is the optional body of POST /v1/leases/{id}/renew.
type renewBody struct {
	TTLMs int64 `json:"ttlMs,omitempty"`
}

// Validate takes any body that decodes: the renewal it makes, path id
// and all, is checked whole by the contract's rules (renewLease).
func (b *renewBody) Validate() error { return nil }

// renewView answers POST /v1/leases/{id}/renew. Notices are what befell
// the lease's device since the lease was last renewed and that no stream
// of it heard (device-unhealthy, device-recovered), oldest first; always a
// list.
type renewView struct {
	LeaseID   string   `json:"leaseId"`
	ExpiresAt string   `json:"expiresAt"`
	TTLMs     int64    `json:"ttlMs"`
	Notices   []string `json:"notices"`
}

func (s *Server) renewLease(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	id := r.PathValue("id")
	var body renewBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	in := contract.LeaseRenewInput{LeaseID: id, TTLMs: body.TTLMs}
	if err := in.Validate(); err != nil {
		return err
	}
	// The daemon tells a renew's session the notices nobody heard, as
	// pushes, before it answers.
	var mu sync.Mutex
	notices := []string{}
	res, err := s.be.Call(r.Context(), tok, contract.OpLeaseRenew, in, func(p contract.Push) {
		switch p.Push {
		case contract.PushDeviceUnhealthy, contract.PushDeviceRecovered:
			mu.Lock()
			notices = append(notices, p.Push)
			mu.Unlock()
		}
	})
	if err != nil {
		return hideLease(tok, err, id)
	}
	lease, err := convert[contract.LeaseRecord](res)
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	s.writeJSON(w, http.StatusOK, renewView{
		LeaseID:   lease.ID,
		ExpiresAt: isoTime(lease.TTLDeadline),
		TTLMs:     lease.TTLMs,
		Notices:   notices,
	})
	return nil
}

// releaseView answers DELETE /v1/leases/{id}: the lease is over, and its
// device is being cleaned in the background.
type releaseView struct {
	Released bool   `json:"released"`
	LeaseID  string `json:"leaseId"`
	Device   struct {
		ID    string               `json:"id"`
		State contract.DeviceState `json:"state"`
	} `json:"device"`
}

func (s *Server) releaseLease(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	id := r.PathValue("id")
	res, err := callAs[contract.ReleaseResult](r.Context(), s, tok, contract.OpLeaseRelease, contract.LeaseIDInput{LeaseID: id})
	if err != nil {
		return hideLease(tok, err, id)
	}
	v := releaseView{Released: true, LeaseID: res.LeaseID}
	if v.LeaseID == "" {
		v.LeaseID = id
	}
	v.Device.ID = res.DeviceID
	v.Device.State = contract.DeviceReclaiming
	s.writeJSON(w, http.StatusAccepted, v)
	return nil
}

func (s *Server) listDevices(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	res, err := callAs[contract.ListGetResult](r.Context(), s, tok, contract.OpListGet, contract.ListGetInput{Kind: contract.ListDevices})
	if err != nil {
		return err
	}
	if res.Devices == nil {
		res.Devices = []contract.Device{}
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"devices": res.Devices})
	return nil
}

// retryDevice serves POST /v1/devices/{id}/retry: a quarantined device is
// cleaned again now; the answer is the device as the retry found it.
func (s *Server) retryDevice(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	in := contract.DeviceIDInput{DeviceID: r.PathValue("id")}
	if err := in.Validate(); err != nil {
		return err
	}
	res, err := callAs[contract.DeviceRetryResult](r.Context(), s, tok, contract.OpDeviceRetry, in)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"device": res.Device})
	return nil
}

// retryLeaseRequest serves POST /v1/lease-requests/{id}/retry: a failed
// request is made again, as it was stored, as a new request (201, its
// resource, as POST /v1/lease-requests answers).
func (s *Server) retryLeaseRequest(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	id := r.PathValue("id")
	in := contract.LeaseRequestRetryInput{RequestID: id}
	if err := in.Validate(); err != nil {
		return err
	}
	status, err := callAs[contract.LeaseRequestStatus](r.Context(), s, tok, contract.OpLeaseRequestRetry, in)
	if err != nil {
		return hideRequest(tok, err, id)
	}
	w.Header().Set("Location", "/v1/lease-requests/"+url.PathEscape(status.Request.ID))
	s.writeJSON(w, http.StatusCreated, map[string]any{"request": s.requestView(r.Context(), tok, status)})
	return nil
}

func (s *Server) replayEvents(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	q := r.URL.Query()
	var in contract.EventsReplayInput
	if raw := q.Get("since"); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d <= 0 {
			return contract.BadRequest("since", "must be a positive duration such as 90s, 10m or 2h, got %q", raw)
		}
		// At least 1: a zero sinceTs would mean "the newest events".
		in.SinceTs = max(s.now().Add(-d).UnixMilli(), 1)
	}
	if raw := q.Get("afterSeq"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 {
			return contract.BadRequest("afterSeq", "must be a whole number, 0 or more, got %q", raw)
		}
		in.AfterSeq = n
	}
	if raw := q.Get("limit"); raw != "" {
		// 0 would mean "the default" to the operation; asked for here
		// it is out of range, as the docs say.
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 10000 {
			return contract.BadRequest("limit", "must be a whole number from 1 to 10000, got %q", raw)
		}
		in.Limit = n
	}
	if err := in.Validate(); err != nil {
		return err
	}
	res, err := callAs[contract.EventsReplayResult](r.Context(), s, tok, contract.OpEventsReplay, in)
	if err != nil {
		return err
	}
	if res.Events == nil {
		res.Events = []contract.Event{}
	}
	s.writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	res, err := callAs[contract.TokenListResult](r.Context(), s, tok, contract.OpTokenList, contract.Empty{})
	if err != nil {
		return err
	}
	if res.Tokens == nil {
		res.Tokens = []contract.TokenRecord{}
	}
	s.writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	res, err := callAs[json.RawMessage](r.Context(), s, tok, contract.OpWorkerList, contract.Empty{})
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) getWorker(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	res, err := callAs[json.RawMessage](r.Context(), s, tok, contract.OpWorkerGet, contract.WorkerIDInput{WorkerID: r.PathValue("id")})
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, res)
	return nil
}

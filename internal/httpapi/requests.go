package httpapi

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/simlock/simlock/internal/apiview"
	"github.com/simlock/simlock/internal/contract"
)

// leaseRequestBody is the body of POST /v1/lease-requests (apiview).
type leaseRequestBody = apiview.LeaseRequestBody

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
	in := body.Input(key)
	if err := apiview.RenameFields(in.Validate(), apiview.LeaseRequestField); err != nil {
		return err
	}
	st, err := s.be.Call(r.Context(), tok, contract.OpLeaseRequestCreate, in, nil)
	if err != nil {
		return apiview.RenameFields(err, apiview.LeaseRequestField)
	}
	status, err := convert[contract.LeaseRequestStatus](st)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/lease-requests/"+url.PathEscape(status.Request.ID))
	s.writeJSON(w, http.StatusCreated, requestEnvelope{Request: s.requestView(r.Context(), tok, status)})
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
	s.writeJSON(w, http.StatusOK, requestEnvelope{Request: s.requestView(r.Context(), tok, st)})
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
	s.writeJSON(w, http.StatusOK, requestList{out})
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
	s.writeJSON(w, http.StatusOK, failedRequestList{out})
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
	s.writeJSON(w, http.StatusCreated, requestEnvelope{Request: s.requestView(r.Context(), tok, status)})
	return nil
}

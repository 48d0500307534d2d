package httpapi

import (
	"net/http"
	"sync"

	"github.com/simlock/simlock/internal/apiview"
	"github.com/simlock/simlock/internal/contract"
)

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
	s.writeJSON(w, http.StatusOK, leaseEnvelope{Lease: leaseViewFromGet(res)})
	return nil
}

// The bodies and views of the lease routes (apiview).
type (
	renewBody   = apiview.RenewBody
	renewView   = apiview.RenewView
	releaseView = apiview.ReleaseView
)

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

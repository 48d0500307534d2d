package httpapi

import (
	"net/http"

	"github.com/simlock/simlock/internal/contract"
)

func (s *Server) listDevices(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	res, err := callAs[contract.ListGetResult](r.Context(), s, tok, contract.OpListGet, contract.ListGetInput{Kind: contract.ListDevices})
	if err != nil {
		return err
	}
	if res.Devices == nil {
		res.Devices = []contract.Device{}
	}
	s.writeJSON(w, http.StatusOK, deviceList{res.Devices})
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
	s.writeJSON(w, http.StatusOK, deviceEnvelope{res.Device})
	return nil
}

package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/simlock/simlock/internal/contract"
)

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

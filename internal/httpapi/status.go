package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

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

package httpapi

import (
	"net/http"

	"github.com/simlock/simlock/internal/contract"
)

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

package httpapi

import (
	"net/http"

	"github.com/simlock/simlock/internal/contract"
)

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

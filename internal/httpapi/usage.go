package httpapi

import (
	"net/http"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// getUsage serves GET /v1/usage?from=&to=&bucket=: the usage figures of a
// window. from and to are epoch ms or a duration before now (24h).
func (s *Server) getUsage(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	q := r.URL.Query()
	now := time.Now().UnixMilli()
	var in contract.UsageGetInput
	if q.Get("from") == "" {
		return contract.BadRequest("from", "is required: epoch milliseconds or a duration before now such as 24h")
	}
	var err error
	if in.From, err = contract.ParseUsageTime("from", q.Get("from"), now); err != nil {
		return err
	}
	if v := q.Get("to"); v != "" {
		if in.To, err = contract.ParseUsageTime("to", v, now); err != nil {
			return err
		}
	}
	in.Bucket = q.Get("bucket")
	if err := in.Validate(); err != nil {
		return err
	}
	res, err := callAs[contract.UsageResult](r.Context(), s, tok, contract.OpUsageGet, in)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, res)
	return nil
}

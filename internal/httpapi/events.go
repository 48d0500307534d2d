package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

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

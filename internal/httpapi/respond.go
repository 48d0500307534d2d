package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/simlock/simlock/internal/apiview"
	"github.com/simlock/simlock/internal/contract"
)

// errorBody is the JSON body of every error response.
type errorBody = apiview.ErrorBody

// writeJSON answers with v as JSON.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.log.Error("could not encode a response", "err", err)
		status = http.StatusInternalServerError
		body, _ = json.Marshal(errorBody{Error: contract.Errorf(contract.CodeInternal, "could not encode the response")})
	}
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError answers with err as {"error":{...}} and the status of its code.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ce := asError(err)
	switch ce.Code {
	case contract.CodeUnauthenticated:
		w.Header().Set("WWW-Authenticate", "Bearer")
	case contract.CodeNoCapacity, contract.CodeTooManyStreams:
		w.Header().Set("Retry-After", "5")
	case contract.CodeNotLeader:
		// A replica takes over within gateway.leaderTimeoutMs.
		w.Header().Set("Retry-After", "1")
	case contract.CodeInternal:
		// A request whose client left fails with whatever the backend
		// made of the cancelled context; that is not worth an error line.
		if r.Context().Err() == nil {
			s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
	}
	s.writeJSON(w, ce.Code.HTTPStatus(), errorBody{Error: ce})
}

// asError is contract.AsError that also turns a code-less *contract.Error
// into INTERNAL, so every answer has a code.
func asError(err error) *contract.Error {
	ce := contract.AsError(err)
	if ce.Code == "" {
		ce = &contract.Error{Code: contract.CodeInternal, Message: ce.Message, Details: ce.Details}
	}
	return ce
}

// decodeBody reads r's body into v strictly. The body was bounded and
// read whole before the handler ran (takeBody, by the route's policy), so
// this only checks its media type and decodes it. An empty body decodes as
// {}.
func (s *Server) decodeBody(_ http.ResponseWriter, r *http.Request, v contract.Validator) error {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		// Only a streamed route's body can fail here, with its own code.
		return err
	}
	if len(bytes.TrimSpace(raw)) > 0 {
		ct := r.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return contract.Errorf(contract.CodeUnsupportedMediaType, "send the request body as Content-Type: application/json, got %q", ct).With("contentType", ct)
		}
	}
	return contract.DecodeInput(raw, v)
}

// convert turns a backend result into T through JSON. Results are contract
// values of whatever concrete type the backend chose (a value, a pointer, a
// map); the JSON form is the contract, so it is what is relied on.
func convert[T any](v any) (T, error) {
	var out T
	raw, err := json.Marshal(v)
	if err != nil {
		return out, fmt.Errorf("httpapi: encode backend result %T: %w", v, err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("httpapi: decode backend result as %T: %w", out, err)
	}
	return out, nil
}

// callAs runs op as tok and converts its result to T.
func callAs[T any](ctx context.Context, s *Server, tok contract.TokenRecord, op contract.Op, in any) (T, error) {
	res, err := s.be.Call(ctx, tok, op, in, nil)
	if err != nil {
		var zero T
		return zero, err
	}
	return convert[T](res)
}

// hideForeign keeps an agent from learning that another agent's lease or
// request exists: the backend's FORBIDDEN becomes the not-found answer.
// Operators see the backend's error as is.
func hideForeign(tok contract.TokenRecord, err error, code contract.Code, key, id string) error {
	if err == nil || tok.Role == contract.TokenOperator {
		return err
	}
	if asError(err).Code != contract.CodeForbidden {
		return err
	}
	what := "lease"
	if code == contract.CodeUnknownLeaseRequest {
		what = "lease request"
	}
	return contract.Errorf(code, "no %s %s", what, id).With(key, id)
}

// hideLease is hideForeign for a lease route.
func hideLease(tok contract.TokenRecord, err error, leaseID string) error {
	return hideForeign(tok, err, contract.CodeUnknownLease, "leaseId", leaseID)
}

// hideRequest is hideForeign for a lease request route.
func hideRequest(tok contract.TokenRecord, err error, requestID string) error {
	return hideForeign(tok, err, contract.CodeUnknownLeaseRequest, "requestId", requestID)
}

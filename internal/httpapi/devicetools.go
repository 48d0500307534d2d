package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// The device tool routes: each is one device tool operation on the lease
// the path names, its answer the operation's result as JSON. A JSON body
// (or, for the logs, the query) carries the rest; the daemon checks the
// caller may act on the lease, as for exec and files.

// toolBody is a device tool route's body: it names the operation's input
// once it knows the lease from the path.
type toolBody interface {
	contract.Validator
	setLease(id string)
	input() contract.DeviceToolInput
}

// serveTool serves op from a body of type B, answering Out.
func serveTool[B any, PB interface {
	*B
	toolBody
}, Out any](op contract.Op) func(*Server, http.ResponseWriter, *http.Request, contract.TokenRecord) error {
	return func(s *Server, w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
		id := r.PathValue("id")
		b := PB(new(B))
		b.setLease(id)
		if err := s.decodeBody(w, r, b); err != nil {
			return err
		}
		return s.answerTool(w, r, tok, op, b.input(), new(Out))
	}
}

// answerTool calls op with in as tok and writes its result, as out's type.
func (s *Server) answerTool(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord, op contract.Op, in contract.DeviceToolInput, out any) error {
	id, _ := in.Lease()
	res, err := s.be.Call(r.Context(), tok, op, in, nil)
	if err != nil {
		return hideLease(tok, err, id)
	}
	switch out := out.(type) {
	case *contract.AppLaunchResult:
		*out, err = convert[contract.AppLaunchResult](res)
	case *contract.AppTerminateResult:
		*out, err = convert[contract.AppTerminateResult](res)
	case *contract.OpenURLResult:
		*out, err = convert[contract.OpenURLResult](res)
	case *contract.DeviceLogs:
		*out, err = convert[contract.DeviceLogs](res)
	case *contract.LocationResult:
		*out, err = convert[contract.LocationResult](res)
	case *contract.AppearanceResult:
		*out, err = convert[contract.AppearanceResult](res)
	}
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, out)
	return nil
}

// leaseInBody is the lease a body's path named, and the requester an
// operator acting for an agent names in it.
type leaseInBody struct {
	RequesterID string `json:"requesterId,omitempty"`
	leaseID     string
}

func (b *leaseInBody) setLease(id string) { b.leaseID = id }
func (b *leaseInBody) ref() contract.LeaseRef {
	return contract.LeaseRef{LeaseID: b.leaseID, RequesterID: b.RequesterID}
}

// launchBody is the body of POST /v1/leases/{id}/launch.
type launchBody struct {
	leaseInBody
	AppID string   `json:"appId"`
	Args  []string `json:"args,omitempty"`
}

func (b *launchBody) input() contract.DeviceToolInput {
	return &contract.AppLaunchInput{LeaseRef: b.ref(), AppID: b.AppID, Args: b.Args}
}

// Validate checks the body with the contract's rules.
func (b *launchBody) Validate() error { return b.input().Validate() }

// terminateBody is the body of POST /v1/leases/{id}/terminate.
type terminateBody struct {
	leaseInBody
	AppID string `json:"appId"`
}

func (b *terminateBody) input() contract.DeviceToolInput {
	return &contract.AppTerminateInput{LeaseRef: b.ref(), AppID: b.AppID}
}

// Validate checks the body with the contract's rules.
func (b *terminateBody) Validate() error { return b.input().Validate() }

// openURLBody is the body of POST /v1/leases/{id}/open-url.
type openURLBody struct {
	leaseInBody
	URL string `json:"url"`
}

func (b *openURLBody) input() contract.DeviceToolInput {
	return &contract.OpenURLInput{LeaseRef: b.ref(), URL: b.URL}
}

// Validate checks the body with the contract's rules.
func (b *openURLBody) Validate() error { return b.input().Validate() }

// locationBody is the body of PUT /v1/leases/{id}/location.
type locationBody struct {
	leaseInBody
	Latitude  *float64 `json:"latitude"`
	Longitude *float64 `json:"longitude"`
}

func (b *locationBody) input() contract.DeviceToolInput {
	return &contract.LocationInput{LeaseRef: b.ref(), Latitude: b.Latitude, Longitude: b.Longitude}
}

// Validate checks the body with the contract's rules.
func (b *locationBody) Validate() error { return b.input().Validate() }

// appearanceBody is the body of PUT /v1/leases/{id}/appearance.
type appearanceBody struct {
	leaseInBody
	Appearance contract.Appearance `json:"appearance"`
}

func (b *appearanceBody) input() contract.DeviceToolInput {
	return &contract.AppearanceInput{LeaseRef: b.ref(), Appearance: b.Appearance}
}

// Validate checks the body with the contract's rules.
func (b *appearanceBody) Validate() error { return b.input().Validate() }

// getLogs serves GET /v1/leases/{id}/logs?lines=&since=&process=: the
// device's last log lines.
func (s *Server) getLogs(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	in := contract.DeviceLogsInput{LeaseRef: contract.LeaseRef{LeaseID: r.PathValue("id")}}
	for k, v := range r.URL.Query() {
		if len(v) != 1 {
			return contract.BadRequest(k, "give it once")
		}
		var err error
		switch k {
		case "lines":
			if in.Lines, err = strconv.Atoi(v[0]); err != nil || in.Lines == 0 {
				return contract.BadRequest(k, "must be a number of lines, 1 to %d", contract.MaxLogLines)
			}
		case "since":
			d, err := time.ParseDuration(v[0])
			if err != nil || d <= 0 || d > contract.MaxLogSince {
				return contract.BadRequest(k, "must be a duration before now, such as 90s, 10m or 2h, at most 24h")
			}
			in.SinceMs = max(d.Milliseconds(), 1)
		case "process":
			in.Process = v[0]
		case "requesterId":
			in.RequesterID = v[0]
		default:
			return contract.BadRequest(k, "unknown query parameter")
		}
	}
	if err := in.Validate(); err != nil {
		return err
	}
	return s.answerTool(w, r, tok, contract.OpDeviceLogs, &in, new(contract.DeviceLogs))
}

package httpapi

import (
	"reflect"
	"slices"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/openapi"
)

// OpenAPI builds the API's OpenAPI 3.1 description from routeTable and
// the contract's types: what GET /v1/openapi.json serves and
// docs/openapi.json holds. It depends on nothing but the code, so every
// call returns the same bytes.
func OpenAPI() ([]byte, error) { return openapi.Build(openAPISpec()) }

// The security schemes, by role.
const (
	schemeAgent    = "agentToken"
	schemeOperator = "operatorToken"
	schemeWorker   = "workerToken"
)

// openAPIDescription is the document's description: what it covers and how
// it says what it says.
const openAPIDescription = `simlock leases iOS simulators and Android emulators to agents. This document is
generated from the daemon's route table and the contract's Go types; docs/HTTP-API.md is its prose
companion. Its server is "/": the daemon that serves it (GET /v1/openapi.json), at the address its
operator gave it (http.host and http.port, 127.0.0.1:4700 by default, or a proxy in front).

Authentication: Authorization: Bearer <token secret>. Agent routes take an agent or an operator token
(agentToken, operatorToken); operator routes only an operator token; the uplink only a worker token.

Errors: every error answer is {"error":{"code","message",...details}}; each operation lists the statuses it
may answer, and each error response lists its codes in x-simlock-codes.

Event streams (text/event-stream): the schema of the stream describes one event, as a oneOf keyed by the
event's name (the const of "event"; "message" is an event sent without a name). Each event's "data" is a
JSON text whose schema is its contentSchema. Comment lines (": keepalive") carry nothing.`

// openAPISpec is the description's input: every route of routeTable, and
// the contract's closed sets as enums.
func openAPISpec() openapi.Spec {
	var ops []openapi.Operation
	for _, rt := range routeTable() {
		ops = append(ops, rt.operation())
	}
	enums := map[reflect.Type][]string{
		typeOf[contract.Platform]():         strs(contract.Platforms()),
		typeOf[contract.DeviceClass]():      strs(contract.Classes()),
		typeOf[contract.DeviceState]():      strs(contract.DeviceStates()),
		typeOf[contract.DeviceMode]():       strs(contract.DeviceModes()),
		typeOf[contract.RequestState]():     strs(contract.RequestStates()),
		typeOf[contract.Stage]():            strs(contract.Stages()),
		typeOf[contract.TokenRole]():        strs(contract.TokenRoles()),
		typeOf[contract.WorkerConnection](): strs(contract.WorkerConnections()),
		typeOf[contract.RejectReason]():     strs(contract.RejectReasons()),
		typeOf[contract.EndReason]():        strs(contract.EndReasons()),
		typeOf[contract.Code]():             codes(),
	}
	return openapi.Spec{
		Title:       "simlock HTTP API",
		Version:     "v1",
		Description: openAPIDescription,
		// Relative to where the document is read: the daemon that serves
		// it at /v1/openapi.json. Its address is the operator's choice
		// (http.host, http.port, a proxy in front), so none is named.
		Servers: []string{"/"},
		SecuritySchemes: map[string]string{
			schemeAgent:    "An agent token (simlock token create --role agent): the agent routes, acting as that agent.",
			schemeOperator: "An operator token (simlock token create --role operator): every route but the uplink, with the admin role.",
			schemeWorker:   "A worker token (simlock token create --role worker, on a gateway): only a worker's uplink.",
		},
		Operations: ops,
		Enums:      enums,
		FieldEnums: map[reflect.Type]map[string][]string{
			typeOf[contract.Event](): {"event": contract.EventNames()},
			typeOf[leaseLostView]():  {"reason": strs(contract.EndReasons())},
			typeOf[requestView]():    {"state": requestStates()},
		},
		Overrides: map[reflect.Type]openapi.Schema{
			typeOf[contract.Error](): {
				"type":        "object",
				"description": "An error: a stable code, a message for people, and the code's details beside them.",
				"required":    []string{"code", "message"},
				"properties": map[string]any{
					"code":    map[string]any{"$ref": "#/components/schemas/Code"},
					"message": map[string]any{"type": "string"},
				},
			},
			typeOf[contract.WorkerChoice](): {
				"description": `The workers of a fleet install: "all", or a list of worker ids.`,
				"anyOf": []any{
					map[string]any{"const": "all"},
					map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
				},
			},
			typeOf[contract.LeaseProgress](): {
				"type":        "object",
				"description": "A step of a wait; only the fields of its stage are set.",
				"required":    []string{"stage"},
				"properties": map[string]any{
					"stage":         map[string]any{"$ref": "#/components/schemas/Stage"},
					"queuePosition": map[string]any{"type": "integer"},
					"wait":          map[string]any{"$ref": "#/components/schemas/QueueWait"},
					"etaMs":         map[string]any{"type": "integer"},
					"detail":        map[string]any{"type": "string"},
					"component":     map[string]any{"type": "string"},
					"waiting":       map[string]any{"type": "boolean"},
					"percent":       map[string]any{"type": "integer"},
					"bytesDone":     map[string]any{"type": "integer"},
					"bytesTotal":    map[string]any{"type": "integer"},
				},
			},
		},
		// The overrides refer to these by name.
		Extra:       []reflect.Type{typeOf[contract.Code](), typeOf[contract.Stage](), typeOf[contract.QueueWait]()},
		ErrorStatus: func(code string) int { return contract.Code(code).HTTPStatus() },
		ErrorType:   typeOf[errorBody](),
	}
}

// commonErrors are the codes every route of acc may answer: a body refused
// before any route runs, a token refused, and a call the daemon could not
// serve (a gateway replica that does not lead answers NOT_LEADER when it
// cannot forward the call to its leader).
func commonErrors(acc access) []contract.Code {
	out := []contract.Code{contract.CodeBadRequest, contract.CodeBodyTimeout, contract.CodeBodyTooLarge}
	if acc == accessPublic {
		return out
	}
	return append(out, contract.CodeUnauthenticated, contract.CodeForbidden, contract.CodeInternal,
		contract.CodeDaemonStopping, contract.CodeDaemonStartupFailed,
		contract.CodeUnsupportedInGatewayMode, contract.CodeUnsupportedInWorkerMode, contract.CodeWorkerUnreachable,
		contract.CodeNotLeader)
}

// operation is the route as the description's operation.
func (rt route) operation() openapi.Operation {
	d := rt.doc
	op := openapi.Operation{
		Method: rt.method, Path: rt.path,
		ID: d.id, Summary: d.summary, Description: d.description,
		Params:       d.params,
		Responses:    d.replies,
		AnonymousToo: d.anonymousToo,
	}
	if d.tag != "" {
		op.Tags = []string{d.tag}
	}
	switch rt.access {
	case accessAgent:
		op.Security = []string{schemeAgent, schemeOperator}
	case accessOperator:
		op.Security = []string{schemeOperator}
	case accessWorker:
		op.Security = []string{schemeWorker}
	}
	switch {
	case d.request != nil:
		op.Request = &openapi.Body{Type: d.request}
	case d.body != nil:
		op.Request = d.body
	}
	for _, c := range append(commonErrors(rt.access), d.errors...) {
		if !slices.Contains(op.Errors, string(c)) {
			op.Errors = append(op.Errors, string(c))
		}
	}
	return op
}

// codes lists every error code, sorted.
func codes() []string {
	out := strs(contract.Codes())
	slices.Sort(out)
	return out
}

func strs[T ~string](vals []T) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}

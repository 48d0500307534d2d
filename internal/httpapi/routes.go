package httpapi

import (
	"net/http"
	"reflect"
	"strconv"

	"github.com/simlock/simlock/internal/apiview"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/openapi"
)

// route is one route of the API: how it is served, and what the API
// description (GET /v1/openapi.json) says of it. routes registers every
// route from routeTable and the description is built from the same table,
// so no route is served that the description lacks.
type route struct {
	method, path string
	// access is who may call it. It is checked before serve runs; a route
	// with raw checks it itself (or is public).
	access access
	// upload gives the route the streamed body policy of the file routes
	// instead of the default one.
	upload bool
	// grantable lets a one-time upload URL call the route without a
	// token (grantable).
	grantable bool
	// mcpBody gives the route the body policy of /mcp (JSON-RPC messages
	// up to mcpMaxBody).
	mcpBody bool
	// serve is an authenticated route's handler.
	serve func(s *Server, w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error
	// raw serves a route that does its own checks: a public route, or the
	// uplink, which tells the backend of a refusal.
	raw func(s *Server, w http.ResponseWriter, r *http.Request)
	doc routeDoc
}

// routeDoc is what the API description says of a route.
type routeDoc struct {
	id, summary, description string
	tag                      string
	// anonymousToo: a caller without a token may be admitted too (by the
	// daemon's settings).
	anonymousToo bool
	params       []openapi.Param
	// request is the JSON request body's type; body a body of another
	// kind (an upload).
	request reflect.Type
	body    *openapi.Body
	replies []openapi.Response
	// errors are the codes the route may answer besides the ones every
	// route of its access may (commonErrors).
	errors []contract.Code
}

// pattern is the route's mux pattern.
func (rt route) pattern() string { return rt.method + " " + rt.path }

// routes registers every route of routeTable.
func (s *Server) routes() {
	for _, rt := range routeTable() {
		switch {
		case rt.raw != nil:
			s.mux.HandleFunc(rt.pattern(), func(w http.ResponseWriter, r *http.Request) { rt.raw(s, w, r) })
		case rt.upload && rt.grantable:
			s.bodies[rt.pattern()] = s.uploadBody()
			s.mux.HandleFunc(rt.pattern(), s.grantable(rt.access, s.bind(rt.serve)))
		case rt.upload:
			s.handleBody(rt.pattern(), rt.access, s.uploadBody(), s.bind(rt.serve))
		case rt.mcpBody:
			s.handleBody(rt.pattern(), rt.access, bodyPolicy{max: mcpMaxBody, whole: s.bodyTimeout}, s.bind(rt.serve))
		default:
			s.handle(rt.pattern(), rt.access, s.bind(rt.serve))
		}
	}
}

// recordingMux is the server's mux, which remembers the pattern of every
// route registered on it: a test holds them against the description.
type recordingMux struct {
	*http.ServeMux
	patterns []string
}

func (m *recordingMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.HandleFunc(pattern, h)
}

func (m *recordingMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

// bind makes a route's handler one of s.
func (s *Server) bind(h func(*Server, http.ResponseWriter, *http.Request, contract.TokenRecord) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error { return h(s, w, r, tok) }
}

// Types the description names, by their zero values.
func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// The replies most routes give.
func ok[T any](desc string) openapi.Response {
	return openapi.Response{Status: http.StatusOK, Description: desc, Bodies: []openapi.Body{{Type: typeOf[T]()}}}
}

func status[T any](code int, desc string) openapi.Response {
	return openapi.Response{Status: code, Description: desc, Bodies: []openapi.Body{{Type: typeOf[T]()}}}
}

func stream(desc string, evs ...openapi.Event) openapi.Response {
	return openapi.Response{Status: http.StatusOK, Description: desc,
		Bodies: []openapi.Body{{ContentType: openapi.EventStream, Events: evs}}}
}

func event[T any](name, desc string) openapi.Event {
	return openapi.Event{Name: name, Type: typeOf[T](), Description: desc}
}

// errorEvent is the error event that ends a stream which failed after it
// started.
var errorEvent = openapi.Event{Name: "error", Type: reflect.TypeFor[errorBody](), Description: "The stream failed after it started; the last event."}

// probeDoc describes a probe: 200 when every check passed, 503 when one
// failed, the same body either way.
func probeDoc(id, summary string) routeDoc {
	return routeDoc{
		id: id, tag: "daemon", summary: summary,
		params: []openapi.Param{query("verbose", "Present (any value, or none): list each check.")},
		replies: []openapi.Response{
			status[contract.HealthReport](http.StatusOK, "Every check passed."),
			status[contract.HealthReport](http.StatusServiceUnavailable, "A check failed."),
		},
	}
}

func query(name, desc string) openapi.Param {
	return openapi.Param{Name: name, In: "query", Description: desc}
}

// healthView answers GET /v1/healthz.
type healthView struct {
	OK bool `json:"ok"`
}

// The wrappers some answers put their record in.
type (
	requestEnvelope = apiview.RequestEnvelope
	leaseEnvelope   = apiview.LeaseEnvelope
	requestList     struct {
		Requests []requestSummary `json:"requests"`
	}
	failedRequestList struct {
		Requests []failedRequest `json:"requests"`
	}
	deviceList struct {
		Devices []contract.Device `json:"devices"`
	}
	deviceEnvelope struct {
		Device contract.Device `json:"device"`
	}
	deviceNotice = apiview.DeviceNotice
)

// requestEvents are the events of a lease request's stream: one per
// change, named by the request's state.
func requestEvents() []openapi.Event {
	var evs []openapi.Event
	for _, name := range requestStates() {
		evs = append(evs, event[requestView](name, "The request, now "+name+"."))
	}
	return append(evs, errorEvent)
}

// requestStates are the values of a request view's state: the stages of a
// wait, then the ends.
func requestStates() []string {
	return []string{
		string(contract.StageQueued), string(contract.StageDownloading), string(contract.StageReclaiming),
		string(contract.StageProvisioning), string(contract.StageBooting),
		string(contract.RequestGranted), string(contract.RequestFailed), string(contract.RequestCancelled),
	}
}

// jobEvents are the events of a job's stream (contract.JobEvent's names).
func jobEvents() []openapi.Event {
	return []openapi.Event{
		event[contract.Job]("job", "The job's record: the first event."),
		event[contract.JobPhase]("phase", "A phase started, moved on, ended or failed on a worker."),
		event[contract.JobProgress]("progress", "How far a download is on a worker."),
		event[contract.JobLog]("log", "A line an installer printed."),
		event[contract.JobWorkerEvent]("worker", "What the gateway did with a worker."),
		event[contract.JobError]("error", "A failure on a worker, or (the last event) the stream's own."),
		event[contract.JobDone]("done", "The job ended: the last event."),
	}
}

// routeTable is every route of the API. The console's paths, outside /v1,
// are not API and not here.
func routeTable() []route {
	leaseID := openapi.Param{Name: "id", In: "path", Description: "The lease's id (or, for an operator, its key)."}
	requestID := openapi.Param{Name: "id", In: "path", Description: "The lease request's id."}
	requester := query("requesterId", "An operator acting on another agent's lease names its requester.")
	requestErrs := []contract.Code{contract.CodeRequesterAlreadyLeased, contract.CodeLeaseIDTaken, contract.CodeIdempotencyConflict,
		contract.CodeNoDriver, contract.CodeUnknownModel, contract.CodeRuntimeMissing, contract.CodeNoCapacity,
		contract.CodeDownloadsDisabled}
	fileErrs := []contract.Code{contract.CodeUnknownLease, contract.CodeTooManyStreams, contract.CodeUnknownTransfer,
		contract.CodeDevicePathRefused, contract.CodePassthroughRefused, contract.CodeNoDriver}
	toolErrs := []contract.Code{contract.CodeUnknownLease, contract.CodeTooManyStreams, contract.CodeNoDriver,
		contract.CodeUnsupportedMediaType, contract.CodeCancelled}
	return []route{
		{method: "GET", path: "/v1/healthz", access: accessPublic, raw: (*Server).healthz, doc: routeDoc{
			id: "getHealth", tag: "daemon", summary: "Is the API up",
			replies: []openapi.Response{ok[healthView]("The API answers.")},
		}},
		{method: "GET", path: "/v1/openapi.json", access: accessPublic, raw: (*Server).openAPI, doc: routeDoc{
			id: "getOpenAPI", tag: "daemon", summary: "This API's OpenAPI 3.1 description",
			replies: []openapi.Response{{Status: http.StatusOK, Description: "The document, as docs/openapi.json.",
				Bodies: []openapi.Body{{Type: typeOf[map[string]any]()}}}},
		}},
		{method: "GET", path: "/metrics", access: accessOperator, raw: (*Server).serveMetrics, doc: routeDoc{
			id: "getMetrics", tag: "daemon", summary: "The daemon's metrics for Prometheus",
			description:  "The Prometheus text format. An operator token, or none when metrics.public is true.",
			anonymousToo: true,
			replies: []openapi.Response{{Status: http.StatusOK, Description: "The metrics, in the Prometheus text exposition format.",
				Bodies: []openapi.Body{{ContentType: "text/plain"}}}},
		}},
		{method: "GET", path: "/livez", access: accessPublic, raw: (*Server).livez, doc: probeDoc("getLiveness", "Does the daemon still decide (liveness probe)")},
		{method: "GET", path: "/readyz", access: accessPublic, raw: (*Server).readyz, doc: probeDoc("getReadiness", "May the daemon be sent work (readiness probe)")},
		{method: "GET", path: "/v1/status", access: accessAgent, serve: (*Server).getStatus, doc: routeDoc{
			id: "getStatus", tag: "daemon", summary: "The daemon's status",
			params:  []openapi.Param{query("summary", "true leaves out the lists, keeping their counts.")},
			replies: []openapi.Response{ok[contract.Status]("The status; while the daemon starts, only daemon and host.")},
		}},
		{method: "GET", path: "/v1/catalog", access: accessAgent, serve: (*Server).getCatalog, doc: routeDoc{
			id: "getCatalog", tag: "daemon", summary: "What can be leased",
			params:  []openapi.Param{{Name: "platform", In: "query", Type: typeOf[contract.Platform](), Description: "Only this platform."}},
			replies: []openapi.Response{ok[contract.CatalogResult]("The catalog by platform.")},
			errors:  []contract.Code{contract.CodeNoDriver},
		}},

		{method: "POST", path: "/v1/lease-requests", access: accessAgent, serve: (*Server).createLeaseRequest, doc: routeDoc{
			id: "createLeaseRequest", tag: "lease requests", summary: "Ask for a device",
			params:  []openapi.Param{{Name: "Idempotency-Key", In: "header", Description: "Makes a retried create return the same request."}},
			request: typeOf[leaseRequestBody](),
			replies: []openapi.Response{
				{Status: http.StatusCreated, Description: "The request, created (or found again by its Idempotency-Key).",
					Bodies: []openapi.Body{{Type: typeOf[requestEnvelope]()}}, Headers: map[string]string{"Location": "The request's URL."}},
			},
			errors: append([]contract.Code{contract.CodeUnsupportedMediaType}, requestErrs...),
		}},
		{method: "GET", path: "/v1/lease-requests", access: accessOperator, serve: (*Server).listLeaseRequests, doc: routeDoc{
			id: "listLeaseRequests", tag: "lease requests", summary: "The open (or lately failed) requests",
			params: []openapi.Param{{Name: "state", In: "query", Enum: []string{"open", "failed"}, Description: "open (the default) or failed."}},
			replies: []openapi.Response{{Status: http.StatusOK, Description: "The requests: open ones in line order, failed ones newest first.",
				Bodies: []openapi.Body{{AnyOf: []reflect.Type{typeOf[requestList](), typeOf[failedRequestList]()}}}}},
		}},
		{method: "GET", path: "/v1/lease-requests/{id}", access: accessAgent, serve: (*Server).getLeaseRequest, doc: routeDoc{
			id: "getLeaseRequest", tag: "lease requests", summary: "A lease request; with ?wait=, once it changes",
			params:  []openapi.Param{requestID, {Name: "wait", In: "query", Type: typeOf[int](), Description: "Seconds (0 to 60) to wait for a change of an open request."}},
			replies: []openapi.Response{ok[requestEnvelope]("The request.")},
			errors:  []contract.Code{contract.CodeUnknownLeaseRequest},
		}},
		{method: "DELETE", path: "/v1/lease-requests/{id}", access: accessAgent, serve: (*Server).cancelLeaseRequest, doc: routeDoc{
			id: "cancelLeaseRequest", tag: "lease requests", summary: "Cancel a lease request",
			params:  []openapi.Param{requestID},
			replies: []openapi.Response{{Status: http.StatusNoContent, Description: "Cancelled."}},
			errors:  []contract.Code{contract.CodeUnknownLeaseRequest, contract.CodeRequestNotCancellable},
		}},
		{method: "GET", path: "/v1/lease-requests/{id}/events", access: accessAgent, serve: (*Server).streamLeaseRequest, doc: routeDoc{
			id: "followLeaseRequest", tag: "lease requests", summary: "Follow a lease request until it settles",
			params: []openapi.Param{requestID, {Name: "Last-Event-ID", In: "header", Description: "The id of the last event seen."}},
			replies: []openapi.Response{
				stream("The request at once, then each change, until it settles.", requestEvents()...),
				{Status: http.StatusNoContent, Description: "The client already saw the settled request (Last-Event-ID)."},
			},
			errors: []contract.Code{contract.CodeUnknownLeaseRequest, contract.CodeTooManyStreams},
		}},
		{method: "POST", path: "/v1/lease-requests/{id}/retry", access: accessOperator, serve: (*Server).retryLeaseRequest, doc: routeDoc{
			id: "retryLeaseRequest", tag: "lease requests", summary: "Make a failed request again, as a new one",
			params: []openapi.Param{requestID},
			replies: []openapi.Response{{Status: http.StatusCreated, Description: "The new request.",
				Bodies: []openapi.Body{{Type: typeOf[requestEnvelope]()}}, Headers: map[string]string{"Location": "The new request's URL."}}},
			errors: append([]contract.Code{contract.CodeUnknownLeaseRequest, contract.CodeNotRetryable}, requestErrs...),
		}},

		{method: "GET", path: "/v1/leases", access: accessAgent, serve: (*Server).listLeases, doc: routeDoc{
			id: "listLeases", tag: "leases", summary: "The leases the caller may see",
			replies: []openapi.Response{ok[contract.LeaseListResult]("The leases.")},
		}},
		{method: "GET", path: "/v1/leases/{id}", access: accessAgent, serve: (*Server).getLease, doc: routeDoc{
			id: "getLease", tag: "leases", summary: "A lease",
			params:  []openapi.Param{leaseID},
			replies: []openapi.Response{ok[leaseEnvelope]("The lease.")},
			errors:  []contract.Code{contract.CodeUnknownLease},
		}},
		{method: "DELETE", path: "/v1/leases/{id}", access: accessAgent, serve: (*Server).releaseLease, doc: routeDoc{
			id: "releaseLease", tag: "leases", summary: "Give a lease back",
			params:  []openapi.Param{leaseID},
			replies: []openapi.Response{status[releaseView](http.StatusAccepted, "Released; the device is cleaned in the background.")},
			errors:  []contract.Code{contract.CodeUnknownLease},
		}},
		{method: "POST", path: "/v1/leases/{id}/renew", access: accessAgent, serve: (*Server).renewLease, doc: routeDoc{
			id: "renewLease", tag: "leases", summary: "Renew a lease",
			params:  []openapi.Param{leaseID},
			request: typeOf[renewBody](),
			replies: []openapi.Response{ok[renewView]("The new deadline, and what befell the device unheard.")},
			errors:  []contract.Code{contract.CodeUnknownLease, contract.CodeUnsupportedMediaType},
		}},
		{method: "GET", path: "/v1/leases/{id}/events", access: accessAgent, serve: (*Server).streamLease, doc: routeDoc{
			id: "followLease", tag: "leases", summary: "Hear when a lease's device fails or the lease ends",
			params: []openapi.Param{leaseID},
			replies: []openapi.Response{stream("Notices about the lease, until it is lost.",
				event[deviceNotice]("device_unhealthy", "The device stopped answering; the daemon tries to recover it."),
				event[deviceNotice]("device_recovered", "The device answers again."),
				event[leaseLostView]("lease_lost", "The lease ended, not by its holder's release: the last event."),
				errorEvent)},
			errors: []contract.Code{contract.CodeUnknownLease, contract.CodeTooManyStreams},
		}},
		{method: "POST", path: "/v1/leases/{id}/exec", access: accessAgent, serve: (*Server).execOnLease, doc: routeDoc{
			id: "execOnLease", tag: "leases", summary: "Run simctl or adb on a leased device",
			params:  []openapi.Param{leaseID},
			request: typeOf[execBody](),
			replies: []openapi.Response{stream("The command's output as it comes, then its exit.",
				event[contract.ExecOutput]("output", "A chunk of the command's output."),
				event[contract.ExecResult]("exit", "The command ended: the last event."),
				errorEvent)},
			errors: []contract.Code{contract.CodeUnknownLease, contract.CodeTooManyStreams, contract.CodeUnsupportedMediaType,
				contract.CodePassthroughRefused, contract.CodeUnknownPassthroughTool, contract.CodeNoDriver, contract.CodeExecTimeout},
		}},
		{method: "PUT", path: "/v1/leases/{id}/files", access: accessAgent, upload: true, serve: (*Server).putFile, doc: routeDoc{
			id: "putFile", tag: "files", summary: "Write a file on a leased device",
			params:  []openapi.Param{leaseID, {Name: "path", In: "query", Required: true, Description: "Where on the device."}, requester},
			body:    &openapi.Body{ContentType: "application/octet-stream", Required: true, Description: "The file's bytes."},
			replies: []openapi.Response{ok[contract.TransferResult]("Written.")},
			errors:  fileErrs,
		}},
		{method: "GET", path: "/v1/leases/{id}/files", access: accessAgent, serve: (*Server).getFile, doc: routeDoc{
			id: "getFile", tag: "files", summary: "Read a file of a leased device",
			params: []openapi.Param{leaseID, {Name: "path", In: "query", Required: true, Description: "Where on the device."}, requester},
			replies: []openapi.Response{{Status: http.StatusOK, Description: "The file's bytes.",
				Bodies: []openapi.Body{{ContentType: "application/octet-stream"}}}},
			errors: append([]contract.Code{contract.CodeDeviceFileMissing}, fileErrs...),
		}},
		{method: "POST", path: "/v1/leases/{id}/apps", access: accessAgent, upload: true, grantable: true, serve: (*Server).installApp, doc: routeDoc{
			id: "installApp", tag: "files", summary: "Install an app on a leased device",
			description: "With a bearer token, or with no Authorization header and a one-time upload URL's upload parameter " +
				"(the MCP tool app_upload_url gives one): it acts as the token that asked for it, once, for that lease, within 10 minutes. " +
				"An upload URL that is used, expired, another lease's, unknown, or whose token was revoked is UNAUTHENTICATED, and installs nothing.",
			params: []openapi.Param{leaseID, requester, {Name: uploadQuery, In: "query",
				Description: "A one-time upload URL's secret, in place of the Authorization header."}},
			body:    &openapi.Body{ContentType: "application/octet-stream", Required: true, Description: "An .apk, .ipa or zipped .app."},
			replies: []openapi.Response{ok[contract.TransferResult]("Installed.")},
			errors:  append([]contract.Code{contract.CodeInvalidApp, contract.CodeAppInstallFailed}, fileErrs...),
		}},
		{method: "GET", path: "/v1/leases/{id}/screenshot", access: accessAgent, serve: (*Server).getScreenshot, doc: routeDoc{
			id: "getScreenshot", tag: "files", summary: "A screenshot of a leased device",
			params: []openapi.Param{leaseID, requester},
			replies: []openapi.Response{{Status: http.StatusOK, Description: "A PNG.",
				Bodies: []openapi.Body{{ContentType: "image/png"}}}},
			errors: fileErrs,
		}},
		{method: "POST", path: "/v1/leases/{id}/launch", access: accessAgent, serve: serveTool[launchBody, *launchBody, contract.AppLaunchResult](contract.OpAppLaunch), doc: routeDoc{
			id: "launchApp", tag: "device tools", summary: "Start an installed app on a leased device",
			description: "Starts the app by its bundle id (iOS, with args passed to it) or package name (Android, its launcher activity, which takes no args). Answers the app's id, and on iOS its pid.",
			params:      []openapi.Param{leaseID},
			request:     typeOf[launchBody](),
			replies:     []openapi.Response{ok[contract.AppLaunchResult]("Started.")},
			errors:      append([]contract.Code{contract.CodeAppNotInstalled}, toolErrs...),
		}},
		{method: "POST", path: "/v1/leases/{id}/terminate", access: accessAgent, serve: serveTool[terminateBody, *terminateBody, contract.AppTerminateResult](contract.OpAppTerminate), doc: routeDoc{
			id: "terminateApp", tag: "device tools", summary: "Stop an app on a leased device",
			description: "Stops the app by its bundle id or package name; an app that is not running is no error.",
			params:      []openapi.Param{leaseID},
			request:     typeOf[terminateBody](),
			replies:     []openapi.Response{ok[contract.AppTerminateResult]("Stopped, or was not running.")},
			errors:      toolErrs,
		}},
		{method: "POST", path: "/v1/leases/{id}/open-url", access: accessAgent, serve: serveTool[openURLBody, *openURLBody, contract.OpenURLResult](contract.OpOpenURL), doc: routeDoc{
			id: "openURL", tag: "device tools", summary: "Open a URL or deep link on a leased device",
			description: "Opens the URL (it must have a scheme; at most 4096 bytes, no white space or control characters) with the app that handles it; a URL no app on the device opens is APP_NOT_INSTALLED.",
			params:      []openapi.Param{leaseID},
			request:     typeOf[openURLBody](),
			replies:     []openapi.Response{ok[contract.OpenURLResult]("Opened.")},
			errors:      append([]contract.Code{contract.CodeAppNotInstalled}, toolErrs...),
		}},
		{method: "GET", path: "/v1/leases/{id}/logs", access: accessAgent, serve: (*Server).getLogs, doc: routeDoc{
			id: "getDeviceLogs", tag: "device tools", summary: "The last lines of a leased device's log",
			description: "The last lines (200 unless lines says, at most 5000) of the device's log, oldest first, of the last since when given, of one process (iOS) or tag (Android) when process is given; at most 1 MiB, the oldest left out past it (truncated).",
			params: []openapi.Param{leaseID,
				{Name: "lines", In: "query", Type: typeOf[int](), Description: "How many of the last lines: 1 to 5000 (default 200)."},
				query("since", "Only the lines of this long before now (90s, 10m, 2h; at most 24h; whole minutes on iOS)."),
				query("process", "Only the lines of this process (iOS) or log tag (Android)."),
				requester},
			replies: []openapi.Response{ok[contract.DeviceLogs]("The lines, oldest first.")},
			errors:  toolErrs,
		}},
		{method: "PUT", path: "/v1/leases/{id}/location", access: accessAgent, serve: serveTool[locationBody, *locationBody, contract.LocationResult](contract.OpSetLocation), doc: routeDoc{
			id: "setLocation", tag: "device tools", summary: "Set a leased device's simulated location",
			description: "Sets the location the device reports: latitude -90 to 90, longitude -180 to 180, in degrees.",
			params:      []openapi.Param{leaseID},
			request:     typeOf[locationBody](),
			replies:     []openapi.Response{ok[contract.LocationResult]("Set.")},
			errors:      toolErrs,
		}},
		{method: "PUT", path: "/v1/leases/{id}/appearance", access: accessAgent, serve: serveTool[appearanceBody, *appearanceBody, contract.AppearanceResult](contract.OpSetAppearance), doc: routeDoc{
			id: "setAppearance", tag: "device tools", summary: "Switch a leased device to light or dark mode",
			params:  []openapi.Param{leaseID},
			request: typeOf[appearanceBody](),
			replies: []openapi.Response{ok[contract.AppearanceResult]("Set.")},
			errors:  toolErrs,
		}},

		{method: "GET", path: "/v1/devices", access: accessOperator, serve: (*Server).listDevices, doc: routeDoc{
			id: "listDevices", tag: "daemon", summary: "Every device",
			replies: []openapi.Response{ok[deviceList]("The devices.")},
		}},
		{method: "POST", path: "/v1/devices/{id}/retry", access: accessOperator, serve: (*Server).retryDevice, doc: routeDoc{
			id: "retryDevice", tag: "daemon", summary: "Clean a quarantined device again now",
			params:  []openapi.Param{{Name: "id", In: "path", Description: "The device's id."}},
			replies: []openapi.Response{ok[deviceEnvelope]("The device as the retry found it.")},
			errors:  []contract.Code{contract.CodeUnknownDevice, contract.CodeNotRetryable},
		}},
		{method: "GET", path: "/v1/events", access: accessOperator, serve: (*Server).replayEvents, doc: routeDoc{
			id: "listEvents", tag: "events", summary: "Past events",
			params: []openapi.Param{
				query("since", "A duration before now (90s, 10m, 2h)."),
				{Name: "afterSeq", In: "query", Type: typeOf[int64](), Description: "Only events after this seq."},
				{Name: "limit", In: "query", Type: typeOf[int](), Description: "1 to 10000 (default 1000)."},
			},
			replies: []openapi.Response{ok[contract.EventsReplayResult]("The events, oldest first.")},
		}},
		{method: "GET", path: "/v1/events/stream", access: accessOperator, serve: (*Server).streamEvents, doc: routeDoc{
			id: "streamEvents", tag: "events", summary: "Every event as it is published",
			params: []openapi.Param{
				{Name: "Last-Event-ID", In: "header", Description: "Resume after this seq."},
				query("lastEventId", "Resume after this seq (for clients that cannot set headers)."),
			},
			replies: []openapi.Response{stream("Each event, sent without an event name (a message), its seq as the id.",
				event[contract.Event]("message", "One event of the daemon's log."), errorEvent)},
			errors: []contract.Code{contract.CodeTooManyStreams},
		}},
		{method: "GET", path: "/v1/tokens", access: accessOperator, serve: (*Server).listTokens, doc: routeDoc{
			id: "listTokens", tag: "daemon", summary: "The HTTP tokens (never their secrets)",
			replies: []openapi.Response{ok[contract.TokenListResult]("The tokens.")},
		}},
		{method: "POST", path: "/v1/components/install", access: accessOperator, serve: (*Server).installComponent, doc: routeDoc{
			id: "installComponent", tag: "components", summary: "Install a runtime (on a gateway, on its workers)",
			request: typeOf[installBody](),
			replies: []openapi.Response{{Status: http.StatusOK,
				Description: "With Accept: text/event-stream, the job's events; otherwise one answer once the install is over " +
					"(a worker's install result, or a gateway's done).",
				Bodies: []openapi.Body{
					{AnyOf: []reflect.Type{typeOf[contract.ComponentInstallResult](), typeOf[contract.JobDone]()}},
					{ContentType: openapi.EventStream, Events: jobEvents()},
				}}},
			errors: []contract.Code{contract.CodeUnsupportedMediaType, contract.CodeDownloadsDisabled, contract.CodeInsufficientDiskSpace,
				contract.CodeLicenseNotAccepted, contract.CodeDownloadTimeout, contract.CodeUnknownWorker, contract.CodeNoDriver,
				contract.CodeRuntimeMissing, contract.CodeComponentBusy, contract.CodeTooManyStreams, contract.CodeCancelled},
		}},
		{method: "GET", path: "/v1/components", access: accessAgent, serve: (*Server).listComponents, doc: routeDoc{
			id: "listComponents", tag: "components", summary: "The installed runtimes",
			params:  []openapi.Param{{Name: "platform", In: "query", Type: typeOf[contract.Platform](), Description: "Only this platform."}},
			replies: []openapi.Response{ok[contract.ComponentListResult]("The runtimes.")},
			errors:  []contract.Code{contract.CodeNoDriver},
		}},
		{method: "DELETE", path: "/v1/components/{platform}/{version}", access: accessOperator, serve: (*Server).removeComponent, doc: routeDoc{
			id: "removeComponent", tag: "components", summary: "Remove a runtime simlock installed",
			params: []openapi.Param{
				{Name: "platform", In: "path", Type: typeOf[contract.Platform]()},
				{Name: "version", In: "path"},
				{Name: "dryRun", In: "query", Type: typeOf[bool](), Description: "Say what would be removed, remove nothing."},
			},
			replies: []openapi.Response{ok[contract.ComponentRemoveResult]("Removed (or, dry, what would be).")},
			errors: []contract.Code{contract.CodeComponentNotOwned, contract.CodeComponentInUse, contract.CodeComponentBusy,
				contract.CodeNoDriver, contract.CodeRuntimeMissing},
		}},
		{method: "GET", path: "/v1/usage", access: accessOperator, serve: (*Server).getUsage, doc: routeDoc{
			id: "getUsage", tag: "daemon", summary: "Usage figures of a window",
			params: []openapi.Param{
				{Name: "from", In: "query", Required: true, Description: "Epoch ms, or a duration before now (24h)."},
				query("to", "Epoch ms, or a duration before now; default now."),
				query("bucket", "The series' bucket (a duration)."),
			},
			replies: []openapi.Response{ok[contract.UsageResult]("The figures.")},
			errors:  []contract.Code{contract.CodeHistoryNotKept},
		}},
		{method: "GET", path: "/v1/jobs", access: accessOperator, serve: (*Server).listJobs, doc: routeDoc{
			id: "listJobs", tag: "jobs", summary: "The install jobs, newest first",
			params: []openapi.Param{
				{Name: "state", In: "query", Enum: []string{"running", "succeeded", "failed"}},
				{Name: "limit", In: "query", Type: typeOf[int](), Description: "1 to 500 (default 50)."},
			},
			replies: []openapi.Response{ok[contract.JobListResult]("The jobs.")},
		}},
		{method: "GET", path: "/v1/jobs/{id}", access: accessOperator, serve: (*Server).getJob, doc: routeDoc{
			id: "getJob", tag: "jobs", summary: "A job",
			replies: []openapi.Response{ok[contract.Job]("The job.")},
			errors:  []contract.Code{contract.CodeUnknownJob},
		}},
		{method: "GET", path: "/v1/jobs/{id}/events", access: accessOperator, serve: (*Server).streamJobEvents, doc: routeDoc{
			id: "followJob", tag: "jobs", summary: "Follow a job until done",
			replies: []openapi.Response{stream("The job's record, then its events until done.", jobEvents()...)},
			errors:  []contract.Code{contract.CodeUnknownJob, contract.CodeTooManyStreams, contract.CodeCancelled},
		}},

		{method: "GET", path: "/v1/workers", access: accessOperator, serve: (*Server).listWorkers, doc: routeDoc{
			id: "listWorkers", tag: "fleet", summary: "A gateway's workers",
			replies: []openapi.Response{ok[contract.WorkerListResult]("The workers.")},
		}},
		{method: "GET", path: "/v1/workers/{id}", access: accessOperator, serve: (*Server).getWorker, doc: routeDoc{
			id: "getWorker", tag: "fleet", summary: "One worker of a gateway",
			replies: []openapi.Response{ok[contract.WorkerView]("The worker.")},
			errors:  []contract.Code{contract.CodeUnknownWorker},
		}},
		{method: "POST", path: "/mcp", access: accessAgent, mcpBody: true, serve: (*Server).serveMCP, doc: mcpDoc("postMCP",
			"Send MCP messages (initialize starts a session)", "A JSON-RPC message of the Model Context Protocol. "+
				"Without an Mcp-Session-Id header it must be initialize, which starts a session acting as the token (its answer's Mcp-Session-Id header names it); "+
				"a call is answered by an event stream carrying its progress notifications and then its result, or by one JSON-RPC message; a notification or a response by 202.")},
		{method: "GET", path: "/mcp", access: accessAgent, mcpBody: true, serve: (*Server).serveMCP, doc: mcpDoc("getMCP",
			"Listen for an MCP session's messages", "The session's own event stream, for messages not tied to a call (warnings of a lost lease).")},
		{method: "DELETE", path: "/mcp", access: accessAgent, mcpBody: true, serve: (*Server).serveMCP, doc: mcpDoc("deleteMCP",
			"End an MCP session", "Ends the session the Mcp-Session-Id header names; its leases stay the token's (see docs/MCP.md).")},
		{method: "GET", path: "/v1/uplink", access: accessWorker, raw: (*Server).uplink, doc: routeDoc{
			id: "openUplink", tag: "fleet", summary: "A worker's uplink to its gateway",
			description: "A WebSocket upgrade: the worker sends the Upgrade request with its worker token and " +
				"the gateway then speaks the daemon protocol over it, one frame per text message.",
			replies: []openapi.Response{{Status: http.StatusSwitchingProtocols, Description: "The WebSocket is open."}},
			errors:  []contract.Code{contract.CodeTooManyWorkers, contract.CodeWorkerConnected},
		}},
	}
}

// healthz serves GET /v1/healthz.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	s.writeJSON(w, http.StatusOK, healthView{OK: true})
}

// openAPI serves GET /v1/openapi.json: the API's description.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := s.document()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc)
}

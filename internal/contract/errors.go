package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
)

// Code is a stable error code. Callers branch on it; messages are for people.
type Code string

// The error codes a caller can see. The table below gives each its CLI exit
// code and HTTP status.
const (
	CodeBadFrame                   Code = "BAD_FRAME"
	CodeHandshakeRequired          Code = "HANDSHAKE_REQUIRED"
	CodeBadRequest                 Code = "BAD_REQUEST"
	CodeUnknownRequest             Code = "UNKNOWN_REQUEST"
	CodeProtocolVersionUnsupported Code = "PROTOCOL_VERSION_UNSUPPORTED"
	CodeAdminAuthenticationFailed  Code = "ADMIN_AUTHENTICATION_FAILED"
	CodeForbidden                  Code = "FORBIDDEN"
	CodeDaemonStopping             Code = "DAEMON_STOPPING"
	CodeDaemonStartupFailed        Code = "DAEMON_STARTUP_FAILED"
	CodeDaemonConnectionLost       Code = "DAEMON_CONNECTION_LOST"
	CodeNoCapacity                 Code = "NO_CAPACITY"
	CodeQueueTimeout               Code = "QUEUE_TIMEOUT"
	CodeRequesterAlreadyLeased     Code = "REQUESTER_ALREADY_LEASED"
	CodeLeaseIDTaken               Code = "LEASE_ID_TAKEN"
	CodeIdempotencyConflict        Code = "IDEMPOTENCY_CONFLICT"
	CodeNoDriver                   Code = "NO_DRIVER"
	CodeRuntimeMissing             Code = "RUNTIME_MISSING"
	CodeUnknownModel               Code = "UNKNOWN_MODEL"
	CodeUnknownLease               Code = "UNKNOWN_LEASE"
	CodeUnknownJob                 Code = "UNKNOWN_JOB"
	CodeCancelled                  Code = "CANCELLED"
	CodeInternal                   Code = "INTERNAL"
	CodeUsage                      Code = "USAGE"
	CodeUnauthenticated            Code = "UNAUTHENTICATED"
	CodeUnknownLeaseRequest        Code = "UNKNOWN_LEASE_REQUEST"
	CodeRequestNotCancellable      Code = "REQUEST_NOT_CANCELLABLE"
	CodeUnknownDevice              Code = "UNKNOWN_DEVICE"
	CodeNotRetryable               Code = "NOT_RETRYABLE"
	CodePassthroughRefused         Code = "PASSTHROUGH_REFUSED"
	CodeUnknownPassthroughTool     Code = "UNKNOWN_PASSTHROUGH_TOOL"
	CodeExecTimeout                Code = "EXEC_TIMEOUT"
	CodeBodyTooLarge               Code = "BODY_TOO_LARGE"
	CodeBodyTimeout                Code = "BODY_TIMEOUT"
	CodeTooManyStreams             Code = "TOO_MANY_STREAMS"
	CodeUnsupportedMediaType       Code = "UNSUPPORTED_MEDIA_TYPE"
	CodeUnknownRoute               Code = "UNKNOWN_ROUTE"
	CodeMethodNotAllowed           Code = "METHOD_NOT_ALLOWED"
	CodeDownloadTimeout            Code = "DOWNLOAD_TIMEOUT"
	CodeDownloadsDisabled          Code = "DOWNLOADS_DISABLED"
	CodeInsufficientDiskSpace      Code = "INSUFFICIENT_DISK_SPACE"
	CodeLicenseNotAccepted         Code = "LICENSE_NOT_ACCEPTED"
	CodeComponentNotOwned          Code = "COMPONENT_NOT_OWNED"
	CodeComponentInUse             Code = "COMPONENT_IN_USE"
	CodeComponentBusy              Code = "COMPONENT_BUSY"
	// CodeHistoryNotKept refuses a usage.get window that ends before the
	// oldest event the log keeps; detail oldestTs says where history begins.
	CodeHistoryNotKept Code = "HISTORY_NOT_KEPT"
	// CodeUnknownMCPSession answers a request to /mcp naming a session
	// that is not open for its token (never was, ended, or another
	// token's); an MCP client starts a new session on it.
	CodeUnknownMCPSession Code = "UNKNOWN_MCP_SESSION"
)

// ExitLeaseLost is the exit code of a lease holder whose lease the daemon ended.
const ExitLeaseLost = 14

// ExitInstallIncomplete is the exit code of a fleet install in which a
// worker did not end installed.
const ExitInstallIncomplete = 15

type codeInfo struct {
	exit   int
	status int
}

// codes is read-only after init: the one table that maps every code to its
// CLI exit code and HTTP status.
var codes = map[Code]codeInfo{
	CodeBadFrame:                   {2, http.StatusBadRequest},
	CodeHandshakeRequired:          {1, http.StatusBadRequest},
	CodeBadRequest:                 {2, http.StatusBadRequest},
	CodeUnknownRequest:             {2, http.StatusBadRequest},
	CodeProtocolVersionUnsupported: {1, http.StatusBadRequest},
	CodeAdminAuthenticationFailed:  {1, http.StatusUnauthorized},
	CodeForbidden:                  {1, http.StatusForbidden},
	CodeDaemonStopping:             {1, http.StatusServiceUnavailable},
	CodeDaemonStartupFailed:        {1, http.StatusServiceUnavailable},
	CodeDaemonConnectionLost:       {1, http.StatusServiceUnavailable},
	CodeNoCapacity:                 {11, http.StatusServiceUnavailable},
	CodeQueueTimeout:               {10, http.StatusInternalServerError},
	CodeRequesterAlreadyLeased:     {13, http.StatusConflict},
	CodeLeaseIDTaken:               {13, http.StatusConflict},
	CodeIdempotencyConflict:        {2, http.StatusConflict},
	CodeNoDriver:                   {12, http.StatusUnprocessableEntity},
	CodeRuntimeMissing:             {12, http.StatusUnprocessableEntity},
	CodeUnknownModel:               {12, http.StatusUnprocessableEntity},
	CodeUnknownLease:               {1, http.StatusNotFound},
	CodeUnknownJob:                 {1, http.StatusNotFound},
	CodeCancelled:                  {1, 499},
	CodeInternal:                   {1, http.StatusInternalServerError},
	CodeUsage:                      {2, http.StatusBadRequest},
	CodeUnauthenticated:            {1, http.StatusUnauthorized},
	CodeUnknownLeaseRequest:        {1, http.StatusNotFound},
	CodeRequestNotCancellable:      {1, http.StatusConflict},
	CodeUnknownDevice:              {1, http.StatusNotFound},
	CodeNotRetryable:               {1, http.StatusConflict},
	CodePassthroughRefused:         {2, http.StatusUnprocessableEntity},
	CodeUnknownPassthroughTool:     {2, http.StatusUnprocessableEntity},
	CodeExecTimeout:                {10, http.StatusGatewayTimeout},
	CodeBodyTooLarge:               {2, http.StatusRequestEntityTooLarge},
	CodeBodyTimeout:                {2, http.StatusRequestTimeout},
	CodeTooManyStreams:             {11, http.StatusServiceUnavailable},
	CodeUnsupportedMediaType:       {2, http.StatusUnsupportedMediaType},
	CodeUnknownRoute:               {2, http.StatusNotFound},
	CodeUnknownMCPSession:          {2, http.StatusNotFound},
	CodeMethodNotAllowed:           {2, http.StatusMethodNotAllowed},
	CodeDownloadTimeout:            {10, http.StatusGatewayTimeout},
	CodeDownloadsDisabled:          {12, http.StatusForbidden},
	CodeInsufficientDiskSpace:      {12, http.StatusUnprocessableEntity},
	CodeLicenseNotAccepted:         {12, http.StatusUnprocessableEntity},
	CodeComponentNotOwned:          {12, http.StatusConflict},
	CodeComponentInUse:             {12, http.StatusConflict},
	CodeComponentBusy:              {11, http.StatusConflict},
	CodeHistoryNotKept:             {1, http.StatusGone},

	CodeUnsupportedInGatewayMode: {2, http.StatusNotImplemented},
	CodeUnsupportedInWorkerMode:  {2, http.StatusNotImplemented},
	CodeUnknownWorker:            {12, http.StatusNotFound},
	CodeWorkerConnected:          {2, http.StatusConflict},
	CodeWorkerUnreachable:        {1, http.StatusServiceUnavailable},
	CodeTooManyWorkers:           {11, http.StatusServiceUnavailable},
	CodeNotLeader:                {1, http.StatusServiceUnavailable},

	CodeUnknownTransfer:   {1, http.StatusNotFound},
	CodeDevicePathRefused: {2, http.StatusUnprocessableEntity},
	CodeDeviceFileMissing: {1, http.StatusNotFound},
	CodeInvalidApp:        {2, http.StatusUnprocessableEntity},
	CodeAppInstallFailed:  {1, http.StatusUnprocessableEntity},
	CodeAppNotInstalled:   {1, http.StatusNotFound},

	CodeServiceUnsupported:   {12, http.StatusNotImplemented},
	CodeServiceManagerFailed: {1, http.StatusBadGateway},
}

// Codes lists every code in the table.
func Codes() []Code {
	out := make([]Code, 0, len(codes))
	for c := range codes {
		out = append(out, c)
	}
	return out
}

// ExitCode is the CLI exit status for the code; unknown codes exit 1.
func (c Code) ExitCode() int {
	if info, ok := codes[c]; ok {
		return info.exit
	}
	return 1
}

// HTTPStatus is the HTTP status for the code; unknown codes are 500.
func (c Code) HTTPStatus() int {
	if info, ok := codes[c]; ok {
		return info.status
	}
	return http.StatusInternalServerError
}

// Error is a failure with a stable code. Details are flattened into the JSON
// object beside code and message: {"code":"…","message":"…","requestId":"…"}.
type Error struct {
	Code    Code
	Message string
	Details map[string]any
}

// Errorf makes an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// With returns a copy of e with one more detail.
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Details = maps.Clone(e.Details)
	if c.Details == nil {
		c.Details = map[string]any{}
	}
	c.Details[key] = value
	return &c
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is matches another *Error with the same code, so errors.Is works on codes.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// MarshalJSON writes code, message and every detail as one flat object.
func (e *Error) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(e.Details)+2)
	maps.Copy(m, e.Details)
	m["code"] = e.Code
	m["message"] = e.Message
	// Messages are for people and say "--lease <id>": not HTML-escaped
	// (every surface sends them as JSON, never inside a page).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON reads the flat form back.
func (e *Error) UnmarshalJSON(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	code, _ := m["code"].(string)
	msg, _ := m["message"].(string)
	delete(m, "code")
	delete(m, "message")
	e.Code, e.Message = Code(code), msg
	e.Details = nil
	if len(m) > 0 {
		e.Details = m
	}
	return nil
}

// AsError finds the *Error in err's chain. An error with no code is INTERNAL,
// keeping its text.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// BadRequest names the field whose value is wrong.
func BadRequest(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	e := &Error{Code: CodeBadRequest, Message: msg}
	if field != "" {
		e.Details = map[string]any{"field": field}
	}
	return e
}

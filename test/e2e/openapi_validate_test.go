package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/simlock/simlock/internal/httpapi"
)

// Every answer the suite gets through http.DefaultClient is checked against
// the API's OpenAPI description: its status must be one the operation
// declares, its Content-Type one declared for that status, a JSON body must
// fit its schema, and each event of an event stream, as it is read, the
// schema of its name. A violation is recorded (the run fails at its end,
// naming the request: see failOnOpenAPIViolations) and the body's reader
// then fails with it, so the test reading the answer (api.do) fails on it
// by name.
func init() {
	http.DefaultClient.Transport = &openAPITransport{base: http.DefaultTransport, contract: apiContract}
}

// apiContract parses the description once, at the first answer.
var apiContract = sync.OnceValues(loadContract)

// apiDoc is the parsed description and what the checks need of it.
type apiDoc struct {
	model   *v3.Document
	check   validator.Validator
	opts    *config.ValidationOptions
	schemas schema_validation.SchemaValidator
	// events are the event schemas of each stream: by "METHOD path",
	// then event name.
	events map[string]map[string]*base.Schema
	// errorBody is the schema of every error answer.
	errorBody *base.Schema
}

// describes reports whether the description has a route at path exactly
// (the routes outside /v1 have no parameters).
func (c *apiDoc) describes(path string) bool {
	_, ok := c.model.Paths.PathItems.Get(path)
	return ok
}

func loadContract() (*apiDoc, error) {
	raw, err := httpapi.OpenAPI()
	if err != nil {
		return nil, err
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		return nil, err
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		return nil, err
	}
	c := &apiDoc{
		model:   &m.Model,
		check:   validator.NewValidatorFromV3Model(&m.Model),
		opts:    config.NewValidationOptions(),
		schemas: schema_validation.NewSchemaValidator(),
		events:  map[string]map[string]*base.Schema{},
	}
	component := func(ref string) (*base.Schema, error) {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		sp := m.Model.Components.Schemas.GetOrZero(name)
		if sp == nil {
			return nil, fmt.Errorf("openapi: no component %s", ref)
		}
		return sp.Schema(), nil
	}
	if c.errorBody, err = component("ErrorBody"); err != nil {
		return nil, err
	}
	// Each stream's events are the oneOf of its schema, keyed by the
	// const of "event", the data's schema its contentSchema.
	var plain struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						OneOf []struct {
							Properties struct {
								Event struct {
									Const string `json:"const"`
								} `json:"event"`
								Data struct {
									ContentSchema struct {
										Ref string `json:"$ref"`
									} `json:"contentSchema"`
								} `json:"data"`
							} `json:"properties"`
						} `json:"oneOf"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &plain); err != nil {
		return nil, err
	}
	for path, item := range plain.Paths {
		for method, op := range item {
			for _, resp := range op.Responses {
				mt, ok := resp.Content["text/event-stream"]
				if !ok {
					continue
				}
				evs := map[string]*base.Schema{}
				for _, alt := range mt.Schema.OneOf {
					s, err := component(alt.Properties.Data.ContentSchema.Ref)
					if err != nil {
						return nil, fmt.Errorf("%s %s event %s: %w", method, path, alt.Properties.Event.Const, err)
					}
					evs[alt.Properties.Event.Const] = s
				}
				c.events[strings.ToUpper(method)+" "+path] = evs
			}
		}
	}
	return c, nil
}

// openAPIViolations are the violations seen in the run.
var openAPIViolations struct {
	mu   sync.Mutex
	list []string
}

func recordViolation(msg string) error {
	openAPIViolations.mu.Lock()
	defer openAPIViolations.mu.Unlock()
	openAPIViolations.list = append(openAPIViolations.list, msg)
	return errors.New(msg)
}

// failOnOpenAPIViolations prints the run's violations and reports whether
// there were any.
func failOnOpenAPIViolations(w io.Writer) bool {
	openAPIViolations.mu.Lock()
	defer openAPIViolations.mu.Unlock()
	for _, v := range openAPIViolations.list {
		fmt.Fprintln(w, v)
	}
	return len(openAPIViolations.list) > 0
}

// openAPITransport checks every answer against the description.
type openAPITransport struct {
	base     http.RoundTripper
	contract func() (*apiDoc, error)
}

func (t *openAPITransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	c, cerr := t.contract()
	if cerr != nil {
		return resp, fmt.Errorf("load the OpenAPI description: %w", cerr)
	}
	if !strings.HasPrefix(req.URL.Path, "/v1") && !c.describes(req.URL.Path) {
		// The console's pages are not API; the few routes outside /v1
		// (/metrics, the probes) are in the description and checked.
		return resp, nil
	}
	return c.checkResponse(req, resp, recordViolation), nil
}

// checkResponse checks resp and returns it, its body replaced by one that
// fails with the violation (or checks a stream's events as they are read).
func (c *apiDoc) checkResponse(req *http.Request, resp *http.Response, record func(string) error) *http.Response {
	name := fmt.Sprintf("OpenAPI violation: %s %s answered %d %s", req.Method, req.URL.RequestURI(), resp.StatusCode, resp.Header.Get("Content-Type"))
	// A GET route answers HEAD too (net/http's mux), without a body.
	asked := req
	if req.Method == http.MethodHead {
		asked = req.Clone(req.Context())
		asked.Method = http.MethodGet
	}
	pathItem, perrs, pathFound := paths.FindPath(asked, c.model, c.opts)
	if len(perrs) > 0 || pathItem == nil {
		// No route: the answer must still be an error body.
		return c.checkPlainError(name, resp, record)
	}
	ct := resp.Header.Get("Content-Type")
	isJSON := strings.HasPrefix(ct, "application/json")
	var body []byte
	if isJSON && req.Method != http.MethodHead {
		var err error
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			resp.Body = io.NopCloser(&failingReader{r: bytes.NewReader(body), err: err})
			return resp
		}
	}
	probe := *resp
	probe.Body = http.NoBody
	if body != nil {
		probe.Body = io.NopCloser(bytes.NewReader(body))
	}
	ok, verrs := c.check.GetResponseBodyValidator().ValidateResponseBodyWithPathItem(asked, &probe, pathItem, pathFound)
	var violation error
	if !ok {
		violation = record(name + ": " + describe(verrs) + bodyExcerpt(body))
	}
	switch {
	case body != nil:
		resp.Body = io.NopCloser(&failingReader{r: bytes.NewReader(body), err: violation})
	case violation != nil:
		resp.Body = &failingBody{body: resp.Body, err: violation}
	case strings.HasPrefix(ct, "text/event-stream"):
		resp.Body = &eventChecker{c: c, name: name, body: resp.Body, record: record,
			events: c.events[req.Method+" "+pathFound]}
	}
	return resp
}

// checkPlainError checks the answer to a request no operation matches:
// an error body (UNKNOWN_ROUTE, METHOD_NOT_ALLOWED, a body refused before
// routing).
func (c *apiDoc) checkPlainError(name string, resp *http.Response, record func(string) error) *http.Response {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || resp.StatusCode < 400 {
			err = record(name + ": no operation matches the request, and the answer is not an error" + bodyExcerpt(body))
		} else if ok, verrs := c.schemas.ValidateSchemaBytes(c.errorBody, body); !ok {
			err = record(name + ": no operation matches, and the body is not an error body: " + describe(verrs) + bodyExcerpt(body))
		}
	}
	resp.Body = io.NopCloser(&failingReader{r: bytes.NewReader(body), err: err})
	return resp
}

func describe(verrs []*verrors.ValidationError) string {
	var parts []string
	for _, e := range verrs {
		p := e.Message
		if e.Reason != "" {
			p += " (" + e.Reason + ")"
		}
		for _, se := range e.SchemaValidationErrors {
			p += fmt.Sprintf("; %s: %s", se.FieldPath, se.Reason)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

func bodyExcerpt(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	if len(body) > 300 {
		body = append(body[:300:300], "…"...)
	}
	return "\nbody: " + string(body)
}

// failingReader reads r, then fails with err (when there is one) where
// it would have ended.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF && f.err != nil {
		return n, f.err
	}
	return n, err
}

// failingBody is a body of an answer found wrong before it was read.
type failingBody struct {
	body io.ReadCloser
	err  error
}

func (f *failingBody) Read([]byte) (int, error) { return 0, f.err }
func (f *failingBody) Close() error             { return f.body.Close() }

// eventChecker passes an event stream through, checking each event's data
// against its name's schema as the event ends; a violation fails the read.
type eventChecker struct {
	c      *apiDoc
	name   string
	body   io.ReadCloser
	events map[string]*base.Schema
	record func(string) error

	line      []byte // the line being read
	event     string
	data      []string
	violation error
}

func (e *eventChecker) Read(p []byte) (int, error) {
	if e.violation != nil {
		return 0, e.violation
	}
	n, err := e.body.Read(p)
	for _, b := range p[:n] {
		if b != '\n' {
			e.line = append(e.line, b)
			continue
		}
		e.endLine(strings.TrimSuffix(string(e.line), "\r"))
		e.line = e.line[:0]
		if e.violation != nil {
			return n, e.violation
		}
	}
	return n, err
}

func (e *eventChecker) endLine(line string) {
	switch {
	case line == "":
		if len(e.data) > 0 {
			e.check()
		}
		e.event, e.data = "", nil
	case strings.HasPrefix(line, ":"):
	default:
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			e.event = value
		case "data":
			e.data = append(e.data, value)
		}
	}
}

// check checks one whole event.
func (e *eventChecker) check() {
	name := e.event
	if name == "" {
		name = "message"
	}
	data := strings.Join(e.data, "\n")
	s, ok := e.events[name]
	if !ok {
		e.violation = e.record(fmt.Sprintf("%s: event %q is not one of the stream's: %s", e.name, name, data))
		return
	}
	if ok, verrs := e.c.schemas.ValidateSchemaString(s, data); !ok {
		e.violation = e.record(fmt.Sprintf("%s: event %q: %s\ndata: %s", e.name, name, describe(verrs), data))
	}
}

func (e *eventChecker) Close() error { return e.body.Close() }

// Package apiclient is the typed Go client of simlock's HTTP API (/v1): the
// CLI's remote profile, `simlock mcp` when it proxies to a remote daemon,
// and the tests speak to a daemon or gateway over HTTP through it, and
// nothing else builds the API's URLs or decodes its bodies by hand.
//
// A Client holds a base URL and a bearer token; it speaks https with the
// system's roots, or with a private CA's certificate (Options.CAFile). An
// error answer becomes the *contract.Error of its body, code and all, so a
// caller maps codes exactly as it does for the daemon socket; a failure to
// reach the server is DAEMON_CONNECTION_LOST.
//
// It may hold several base URLs, the replicas of one gateway: it keeps to
// the one that last answered, and moves a call on to the next (see
// failover.go) only when the call cannot have reached a leader, or may be
// sent twice.
//
// A Client is safe for concurrent use. Calls are bounded by their context;
// the ones that answer at once are also bounded by Options.Timeout, the
// streams (a request's events, exec, files) only by their context and by
// the transport's bounds on connecting and on waiting for the headers.
package apiclient

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/internal/apiview"
	"github.com/simlock/simlock/internal/contract"
)

// Options configure a Client.
type Options struct {
	// URL is the daemon's or gateway's base URL: http://host:port or
	// https://host:port, with no path beyond "/"; or a comma-separated
	// list of them, the replicas of one gateway (ParseURLs).
	URL string
	// Token is the bearer token sent with every call ("" sends none).
	Token string
	// CAFile is a PEM file of the certificates that sign the server's
	// (a private CA); "" uses the system's roots.
	CAFile string
	// Timeout bounds each call that answers at once (default 30s).
	Timeout time.Duration
	// UserAgent names the caller (default simlock-apiclient).
	UserAgent string
	// MaxAnswerBytes bounds a JSON answer (default MaxAnswerBytes).
	MaxAnswerBytes int64
}

// DefaultTimeout bounds a call that answers at once.
const DefaultTimeout = 30 * time.Second

// Client is a client of one daemon's HTTP API, or of one gateway's
// replicas.
type Client struct {
	// bases are the server's base URLs, in the order given; cur is the
	// index of the one in use.
	bases   []*url.URL
	cur     atomic.Int64
	token   string
	timeout time.Duration
	agent   string
	hc      *http.Client
	// maxAnswer bounds a JSON answer's bytes.
	maxAnswer int64
}

// New checks the options and returns a client; it does not connect.
func New(o Options) (*Client, error) {
	bases, err := ParseURLs(o.URL)
	if err != nil {
		return nil, err
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pool, err := AppendCA(x509.NewCertPool(), o.CAFile)
		if err != nil {
			return nil, err
		}
		tlsConf.RootCAs = pool
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConf,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   4,
		ForceAttemptHTTP2:     true,
	}
	c := &Client{bases: bases, token: o.Token, timeout: o.Timeout, agent: o.UserAgent, hc: &http.Client{Transport: tr}}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.agent == "" {
		c.agent = "simlock-apiclient"
	}
	c.maxAnswer = cmp.Or(o.MaxAnswerBytes, MaxAnswerBytes)
	return c, nil
}

// AppendCA adds the certificates of the PEM file caFile (SIMLOCK_CA) to
// pool and returns it: the one reading of that file, for the CLI's client
// (which trusts it alone) and a gateway replica's proxy to its leader
// (which trusts it beside the system's roots).
func AppendCA(pool *x509.CertPool, caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, contract.Errorf(contract.CodeUsage, "SIMLOCK_CA: %v", err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, contract.Errorf(contract.CodeUsage, "SIMLOCK_CA: %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// ParseURL checks a base URL: http or https, a host, and no path, query or
// fragment beyond a trailing "/". It is the one rule for SIMLOCK_URL and
// simlock login's argument.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	bad := func(why string) error {
		return contract.Errorf(contract.CodeUsage, "the daemon URL %q %s", raw, why).With("field", "url")
	}
	switch {
	case err != nil:
		return nil, bad("does not parse")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, bad("must start with http:// or https://")
	case u.Host == "":
		return nil, bad("names no host")
	case u.User != nil:
		return nil, bad("must not carry credentials; give the token with SIMLOCK_TOKEN or simlock login")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return nil, bad("must be the daemon's base URL, without a path")
	}
	u.Path = ""
	return u, nil
}

// ParseURLs checks a comma-separated list of base URLs (one URL is a list
// of one), each as ParseURL does: the one rule for SIMLOCK_URL and simlock
// login's argument, which may name a gateway's replicas.
func ParseURLs(raw string) ([]*url.URL, error) {
	var out []*url.URL
	for _, item := range strings.Split(raw, ",") {
		if strings.TrimSpace(item) == "" && strings.Contains(raw, ",") {
			return nil, contract.Errorf(contract.CodeUsage, "the daemon URL list %q has an empty item", raw).With("field", "url")
		}
		u, err := ParseURL(item)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// base is the base URL in use.
func (c *Client) base() *url.URL { return c.bases[c.cur.Load()] }

// URL is the client's base URL in use.
func (c *Client) URL() string { return c.base().String() }

// Endpoint is the URL of path (such as "/mcp") on the client's server in
// use.
func (c *Client) Endpoint(path string) string { return c.base().JoinPath(path).String() }

// HTTPClient is the client's HTTP client, with its TLS trust (SIMLOCK_CA)
// and dial bounds but no per-call timeout, for a long-lived exchange of
// another protocol with the same server (the MCP relay). With several base
// URLs, a request to any of them goes to the one in use and on to the
// next as the client's own calls do (failover.go).
func (c *Client) HTTPClient() *http.Client {
	if len(c.bases) == 1 {
		return c.hc
	}
	return &http.Client{Transport: failoverTransport{c}}
}

// Close drops the idle connections; the client may still be used.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// request builds a call of path (already escaped) with q.
func (c *Client) request(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Request, error) {
	u := *c.base()
	u.RawPath = path
	u.Path, _ = url.PathUnescape(path)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("apiclient: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("User-Agent", c.agent)
	return req, nil
}

// send runs req and returns its response when its status is want (or any
// 2xx when want is 0); any other answer is the error its body says.
func (c *Client) send(req *http.Request, want ...int) (*http.Response, error) {
	res, _, err := c.sendAt(req, want...)
	return res, err
}

// sendAt is send, also saying which base URL answered (an index of
// c.bases), moving on to the next replica as failover.go says.
func (c *Client) sendAt(req *http.Request, want ...int) (*http.Response, int, error) {
	res, at, err := c.do(req)
	if err != nil {
		return nil, at, err
	}
	ok := res.StatusCode/100 == 2
	if len(want) > 0 {
		ok = false
		for _, w := range want {
			ok = ok || res.StatusCode == w
		}
	}
	if ok {
		return res, at, nil
	}
	defer res.Body.Close()
	return nil, at, decodeError(res)
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// maxErrorBody bounds what is read of an error answer.
const maxErrorBody = 64 << 10

// decodeError is the error an answer of a failure carries: its body's
// contract error when it has one, else one made of its status.
func decodeError(res *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	var eb apiview.ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error != nil && eb.Error.Code != "" {
		return eb.Error
	}
	return statusError(res.StatusCode, strings.TrimSpace(string(b)))
}

// statusError is the error of an answer without an error body (a proxy's
// page, say): the code its status stands for.
func statusError(status int, text string) error {
	code := contract.CodeInternal
	switch status {
	case http.StatusUnauthorized:
		code = contract.CodeUnauthenticated
	case http.StatusForbidden:
		code = contract.CodeForbidden
	case http.StatusNotFound:
		code = contract.CodeUnknownRoute
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		code = contract.CodeDaemonConnectionLost
	}
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	if text == "" {
		text = http.StatusText(status)
	}
	return contract.Errorf(code, "the server answered %d: %s", status, text)
}

// call sends in (nil: no body) as JSON and decodes the answer into out
// (nil: none), within the client's timeout.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any, want ...int) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("apiclient: encode: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.decode(req, out, want...)
}

// MaxAnswerBytes bounds a JSON answer the client reads: a whole fleet's
// status fits many times over.
const MaxAnswerBytes = 256 << 20

// decode sends req and decodes its JSON answer into out.
func (c *Client) decode(req *http.Request, out any, want ...int) error {
	req.Header.Set("Accept", "application/json")
	res, err := c.send(req, want...)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxErrorBody))
		return nil
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" {
		return contract.Errorf(contract.CodeInternal, "%s %s answered %q, not JSON", req.Method, req.URL.Path, mt)
	}
	// The server is a claim too: an answer past MaxAnswerBytes is refused
	// rather than read into memory without end.
	body := &io.LimitedReader{R: res.Body, N: c.maxAnswer + 1}
	if err := json.NewDecoder(body).Decode(out); err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return ctxErr
		}
		if body.N <= 0 {
			return contract.Errorf(contract.CodeBodyTooLarge, "the answer of %s %s passed %d bytes", req.Method, req.URL.Path, c.maxAnswer).With("maxBytes", c.maxAnswer)
		}
		return contract.Errorf(contract.CodeDaemonConnectionLost, "read the answer of %s %s: %v", req.Method, req.URL.Path, err)
	}
	return nil
}

// esc escapes one path segment.
func esc(s string) string { return url.PathEscape(s) }

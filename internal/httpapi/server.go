// Package httpapi serves simlock's HTTP API: lease requests, leases, device
// commands and events over JSON and server-sent events, for agents that cannot
// speak the daemon's socket protocol. It holds no state of its own beyond
// open streams: every route authenticates a bearer token and calls the same
// operations as the other frontends through Backend, then reshapes the
// results into the HTTP views documented in docs/HTTP-API.md.
package httpapi

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Defaults for Options fields left zero.
const (
	DefaultKeepAlive = 15 * time.Second
	DefaultMaxBody   = 64 << 10
)

// Options configures a Server.
type Options struct {
	Backend Backend
	// Logger gets request failures and stream ends; nil discards them.
	Logger *slog.Logger
	// KeepAlive is how often an idle event stream gets a comment, so that
	// proxies and clients do not time it out; 0 means DefaultKeepAlive.
	KeepAlive time.Duration
	// MaxBody caps a request body in bytes; 0 means DefaultMaxBody.
	MaxBody int64
	// Now is the clock for ?since= on /v1/events; nil means time.Now.
	Now func() time.Time
	// BodyTimeout bounds how long a request body may take to arrive; 0
	// means DefaultBodyTimeout.
	BodyTimeout time.Duration
	// MaxStreams and MaxStreamsPerToken cap the event streams open at once
	// (http.maxStreams, http.maxStreamsPerToken); 0 means the defaults.
	MaxStreams, MaxStreamsPerToken int
	// Console, when set, answers GET and HEAD at every path outside /v1
	// (the operator console); without it those paths are unknown routes.
	Console http.Handler
	// MaxUploadBytes caps a file route's request body
	// (exec.maxUploadBytes); 0 means DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// UploadIdle bounds the wait for the next byte of a file route's
	// request body, and for the client to take the next chunk of its
	// response (exec.transferIdleMs); 0 means DefaultUploadIdle.
	UploadIdle time.Duration
	// Metrics, when set, answers GET /metrics (the Prometheus text
	// format): to an operator token, or to anyone with MetricsPublic
	// (metrics.public).
	Metrics       http.Handler
	MetricsPublic bool
	// Health runs the checks of GET /livez and GET /readyz; nil passes
	// both with no checks.
	Health HealthFunc
	// MCP starts the sessions of /mcp (MCP over Streamable HTTP); nil
	// leaves the route answering UNKNOWN_ROUTE. MaxMCPSessions and
	// MaxMCPSessionsPerToken bound the sessions open at once
	// (http.maxMcpSessions, http.maxMcpSessionsPerToken), MCPSessionIdle
	// ends a session no request has named for that long
	// (http.mcpSessionIdleMs); 0 means the defaults.
	MCP                                    MCPStart
	MaxMCPSessions, MaxMCPSessionsPerToken int
	MCPSessionIdle                         time.Duration
	// Follow, when set, makes the server a gateway replica's: while it
	// reports that the replica follows, the API is the leader's, reached
	// through a reverse proxy (follow.go). LeaderRoots are the roots an
	// https leader's certificate is checked against; nil means the
	// system's.
	Follow      FollowFunc
	LeaderRoots *x509.CertPool
}

// The defaults of the file routes' bounds.
const (
	DefaultMaxUploadBytes = 2 << 30
	DefaultUploadIdle     = 30 * time.Second
)

// The default caps on open event streams, and on a body's arrival.
const (
	DefaultBodyTimeout        = 10 * time.Second
	DefaultMaxStreams         = 256
	DefaultMaxStreamsPerToken = 32
)

// Server is the HTTP API as an http.Handler.
type Server struct {
	be        Backend
	log       *slog.Logger
	keepAlive time.Duration
	maxBody   int64
	now       func() time.Time
	mux       *recordingMux
	console   http.Handler
	metrics   http.Handler
	// metricsPublic serves metrics without a token.
	metricsPublic bool
	health        HealthFunc
	// following and toLeader are a replica's gate and its proxy's
	// transport (follow.go).
	following FollowFunc
	toLeader  *http.Transport

	// closed is closed by Close; open streams watch it so that
	// http.Server.Shutdown is not held up by them.
	closed    chan struct{}
	closeOnce sync.Once

	bodyTimeout                    time.Duration
	maxUpload                      int64
	uploadIdle                     time.Duration
	maxStreams, maxStreamsPerToken int
	streamsMu                      sync.Mutex
	// streamsMu guards the counts below.
	streams        int
	streamsByToken map[string]int

	liveMu sync.Mutex
	// liveMu guards the fields below: the authenticated requests in
	// flight, by token id, each with the cancel of its context, and the
	// tokens EndToken ended (ids are never reused, so a request that
	// authenticated just before its token ended is cut when it registers).
	live      map[string]map[*liveRequest]struct{}
	endedToks map[string]struct{}

	// mcp holds the sessions of /mcp.
	mcp *mcpHub
	// uploads holds the one-time upload URLs of /mcp sessions.
	uploads *uploadGrants

	// document is the API's description, built at its first request.
	document func() ([]byte, error)

	// bodies holds the body policy of each route, by mux pattern.
	// Written only while the routes are registered, before serving.
	bodies map[string]bodyPolicy

	lingerMu sync.Mutex
	// lingerMu guards lingering: the connections of refused bodies that
	// linger before they close (lingerWriter), which Close ends; lingers
	// counts their goroutines.
	lingering map[net.Conn]struct{}
	lingers   sync.WaitGroup
}

// liveRequest is one authenticated request in flight.
type liveRequest struct{ cancel context.CancelCauseFunc }

// New returns a Server for opts.
func New(opts Options) *Server {
	s := &Server{
		be:            opts.Backend,
		log:           opts.Logger,
		keepAlive:     opts.KeepAlive,
		maxBody:       opts.MaxBody,
		now:           opts.Now,
		mux:           &recordingMux{ServeMux: http.NewServeMux()},
		console:       opts.Console,
		metrics:       opts.Metrics,
		metricsPublic: opts.MetricsPublic,
		health:        opts.Health,
		following:     opts.Follow,
		toLeader:      leaderTransport(opts.LeaderRoots),
		closed:        make(chan struct{}),

		bodyTimeout: cmp.Or(opts.BodyTimeout, DefaultBodyTimeout),
		maxUpload:   cmp.Or(opts.MaxUploadBytes, DefaultMaxUploadBytes),
		uploadIdle:  cmp.Or(opts.UploadIdle, DefaultUploadIdle),
		maxStreams:  cmp.Or(opts.MaxStreams, DefaultMaxStreams), maxStreamsPerToken: cmp.Or(opts.MaxStreamsPerToken, DefaultMaxStreamsPerToken),
		streamsByToken: map[string]int{},
		live:           map[string]map[*liveRequest]struct{}{},
		endedToks:      map[string]struct{}{},
		bodies:         map[string]bodyPolicy{},
		lingering:      map[net.Conn]struct{}{},
		document:       sync.OnceValues(OpenAPI),
		mcp:            newMCPHub(opts),
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.keepAlive <= 0 {
		s.keepAlive = DefaultKeepAlive
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBody
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.uploads = newUploadGrants(s.now)
	s.routes()
	return s
}

// Close ends every open event stream and MCP session promptly and makes
// new ones answer 503 DAEMON_STOPPING, and closes the connections of
// refused bodies still lingering. Plain requests are not affected. It is
// safe to call more than once.
func (s *Server) Close() {
	s.lingerMu.Lock()
	s.closeOnce.Do(func() { close(s.closed) })
	s.lingerMu.Unlock()
	s.endLingering()
	s.mcp.close()
}

func (s *Server) stopping() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// access is which tokens may use a route.
type access int

const (
	accessPublic   access = iota // anyone, without a token
	accessAgent                  // agent and operator tokens
	accessOperator               // operator tokens only
	accessWorker                 // worker (join) tokens only: the uplink
)

// handlerFunc serves an authenticated route. An error it returns is written
// as the JSON error response, so it must return nil once it has written
// anything itself.
type handlerFunc func(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error

// uplink serves GET /v1/uplink. A refusal is also told to the backend,
// which records it (a gateway's worker.rejected).
func (s *Server) uplink(w http.ResponseWriter, r *http.Request) {
	tok, err := s.authenticate(r)
	if err == nil {
		err = allowed(accessWorker, tok)
	}
	if err != nil {
		s.be.UplinkRefused(r, asError(err))
		s.writeError(w, r, err)
		return
	}
	if err := s.be.Uplink(w, r, tok); err != nil {
		s.writeError(w, r, err)
	}
}

// handle registers an authenticated route whose body has the default
// policy (MaxBody bytes, read whole within BodyTimeout before h runs).
func (s *Server) handle(pattern string, acc access, h handlerFunc) {
	s.handleBody(pattern, acc, s.defaultBody(), h)
}

// handleBody registers an authenticated route whose body has policy pol
// (an upload streams its body: streamed, with its own max and idle bound).
func (s *Server) handleBody(pattern string, acc access, pol bodyPolicy, h handlerFunc) {
	s.bodies[pattern] = pol
	s.mux.HandleFunc(pattern, s.authed(acc, h))
}

// authed serves h for a caller whose token acc admits, and answers anyone
// else with the error that says why.
func (s *Server) authed(acc access, h handlerFunc) http.HandlerFunc {
	return s.authedBy(s.authenticate, acc, h)
}

// authedBy is authed with the caller's token found by auth.
func (s *Server) authedBy(auth func(*http.Request) (contract.TokenRecord, error), acc access, h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, err := auth(r)
		if err == nil {
			err = allowed(acc, tok)
		}
		if err == nil {
			ctx, done := s.track(r.Context(), tok)
			defer done()
			r = r.WithContext(ctx)
			if revoked(ctx) {
				// Authenticated a moment before its token ended.
				err = errTokenRevoked
			} else {
				err = h(w, r, tok)
			}
			if err != nil && revoked(ctx) {
				// The call failed because its session was cut, not
				// for a reason of its own.
				err = errTokenRevoked
			}
		}
		if err != nil {
			if sb, ok := r.Body.(*streamBody); ok {
				sb.finish() // a refusal does not wait for the rest of an upload
			}
			s.writeError(w, r, err)
		}
	}
}

// errTokenRevoked is what a request, stream or command of a token that was
// revoked ends with (the last event of a stream, or the error answer).
var errTokenRevoked = contract.Errorf(contract.CodeUnauthenticated, "the token was revoked")

// revoked reports whether ctx, a request's or anything derived from it,
// ended because EndToken ended its token.
func revoked(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), errTokenRevoked)
}

// track gives an authenticated request of tok a context that EndToken
// cancels, and registers it until done is called.
func (s *Server) track(parent context.Context, tok contract.TokenRecord) (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(parent)
	lr := &liveRequest{cancel: cancel}
	s.liveMu.Lock()
	if _, ended := s.endedToks[tok.ID]; ended {
		cancel(errTokenRevoked)
	} else {
		set := s.live[tok.ID]
		if set == nil {
			set = map[*liveRequest]struct{}{}
			s.live[tok.ID] = set
		}
		set[lr] = struct{}{}
	}
	s.liveMu.Unlock()
	return ctx, func() {
		s.liveMu.Lock()
		if set := s.live[tok.ID]; set != nil {
			delete(set, lr)
			if len(set) == 0 {
				delete(s.live, tok.ID)
			}
		}
		s.liveMu.Unlock()
		cancel(nil)
	}
}

// EndToken ends everything the token with this id holds open: its event,
// lease, request and job streams, its long polls and its commands end at
// once, each stream with a last error event (UNAUTHENTICATED, "the token
// was revoked") where it has started, a call not yet answered with that
// error; its MCP sessions end (their leases stay the token's), and its
// upload URLs are forgotten. The daemon calls it when the token is revoked; the token's
// secret must already be refused by Backend.Authenticate, so nothing new
// opens after it.
func (s *Server) EndToken(id string) {
	s.liveMu.Lock()
	s.endedToks[id] = struct{}{}
	set := s.live[id]
	delete(s.live, id)
	s.liveMu.Unlock()
	for lr := range set {
		lr.cancel(errTokenRevoked)
	}
	s.uploads.endToken(id)
	s.mcp.endToken(id)
}

// sayRevoked ends a started stream whose token was revoked with an error
// event saying so; a stream that ended for any other reason ends as it
// did.
func sayRevoked(ctx context.Context, sw *sseWriter) {
	if revoked(ctx) {
		_ = sw.event("error", "", errorBody{Error: errTokenRevoked})
	}
}

// allowed says whether tok may use a route of access acc. A worker token
// opens an uplink and nothing else; no other token opens one.
func allowed(acc access, tok contract.TokenRecord) error {
	switch {
	case acc == accessWorker && tok.Role != contract.TokenWorker:
		return contract.Errorf(contract.CodeForbidden, "the uplink needs a worker token (simlock token create --role worker on the gateway)")
	case acc != accessWorker && tok.Role == contract.TokenWorker:
		return contract.Errorf(contract.CodeForbidden, "a worker token only opens a worker's uplink")
	case acc == accessOperator && tok.Role != contract.TokenOperator:
		return contract.Errorf(contract.CodeForbidden, "this route needs an operator token")
	}
	return nil
}

// authenticate checks the bearer token of r.
func (s *Server) authenticate(r *http.Request) (contract.TokenRecord, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return contract.TokenRecord{}, contract.Errorf(contract.CodeUnauthenticated, "missing Authorization header; send Authorization: Bearer <token secret>")
	}
	scheme, secret, ok := strings.Cut(h, " ")
	secret = strings.TrimSpace(secret)
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" || strings.ContainsAny(secret, " \t") {
		return contract.TokenRecord{}, contract.Errorf(contract.CodeUnauthenticated, "malformed Authorization header; send Authorization: Bearer <token secret>")
	}
	return s.be.Authenticate(r.Context(), secret)
}

// ServeHTTP routes r. On a gateway replica that does not lead, the gate
// (follow) answers first, before the body is read. Its body is taken first, by its route's policy (the
// default for any request no route matches), so every route answers a body
// that is too large or too slow the same way. The mux's own 404 and 405
// answers are plain text, so requests no pattern matches are answered here
// instead, as JSON.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if s.follow(rw, r) {
		return
	}
	lw := &lingerWriter{ResponseWriter: rw, s: s}
	defer lw.finish()
	var w http.ResponseWriter = lw
	pol := s.defaultBody()
	_, routed := s.mux.Handler(r)
	if routed != "" {
		if p, ok := s.bodies[routed]; ok {
			pol = p
		}
	}
	if !s.takeBody(w, r, pol) {
		return
	}
	if sb, ok := r.Body.(*streamBody); ok {
		defer sb.finish()
	}
	// The console has every GET outside /v1 but the routes registered
	// there (/metrics, the probes).
	if p := r.URL.Path; s.console != nil && routed == "" && p != "/v1" && !strings.HasPrefix(p, "/v1/") &&
		(r.Method == http.MethodGet || r.Method == http.MethodHead) {
		s.console.ServeHTTP(w, r)
		return
	}
	// The mux redirects unclean paths (//, /./, a trailing slash) to
	// their clean form with an HTML body; an API client is better told
	// that the path it used does not exist.
	if p := r.URL.Path; p == "" || path.Clean(p) != p {
		s.writeError(w, r, contract.Errorf(contract.CodeUnknownRoute, "no route %s %s", r.Method, r.URL.Path))
		return
	}
	if _, pattern := s.mux.Handler(r); pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	// Probe the other methods to tell an unknown path from a known one
	// asked with the wrong method.
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.WithContext(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		s.writeError(w, r, contract.Errorf(contract.CodeUnknownRoute, "no route %s %s", r.Method, r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	s.writeError(w, r, contract.Errorf(contract.CodeMethodNotAllowed, "%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
}

// streamContext is the context of one stream's backend session: it ends when
// the client goes away, when the handler returns (cancel), or at Close.
// openStream admits one more event stream for tok, or refuses it (the
// daemon stopping; too many streams open, in all or of this token) before
// anything is asked of the daemon. release gives its place back.
func (s *Server) openStream(tok contract.TokenRecord) (release func(), err error) {
	if s.stopping() {
		return nil, errStopping()
	}
	s.streamsMu.Lock()
	defer s.streamsMu.Unlock()
	switch {
	case s.streams >= s.maxStreams:
		return nil, contract.Errorf(contract.CodeTooManyStreams, "%d event streams are open, the most the daemon serves (http.maxStreams); close one or try again later", s.streams).
			With("maxStreams", s.maxStreams)
	case s.streamsByToken[tok.ID] >= s.maxStreamsPerToken:
		return nil, contract.Errorf(contract.CodeTooManyStreams, "this token has %d event streams open, the most one token may (http.maxStreamsPerToken); close one first", s.streamsByToken[tok.ID]).
			With("maxStreamsPerToken", s.maxStreamsPerToken)
	}
	s.streams++
	s.streamsByToken[tok.ID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.streamsMu.Lock()
			defer s.streamsMu.Unlock()
			s.streams--
			if s.streamsByToken[tok.ID]--; s.streamsByToken[tok.ID] == 0 {
				delete(s.streamsByToken, tok.ID)
			}
		})
	}, nil
}

func (s *Server) streamContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

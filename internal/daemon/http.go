package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/simlock/simlock/internal/console"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/httpapi"
)

// listenHTTP starts the HTTP API when http.enabled is set. It runs with the
// socket claim, before startup converges: requests that need the engine
// wait in the dispatcher like socket calls do.
func (d *Daemon) listenHTTP() error {
	cfg := d.opts.Config
	if !cfg.Bool("http.enabled") {
		return nil
	}
	addr := net.JoinHostPort(cfg.String("http.host"), strconv.FormatInt(cfg.Int("http.port"), 10))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("http.enabled is set but the HTTP API cannot listen on %s: %w", addr, err)
	}
	d.httpURL = "http://" + ln.Addr().String()
	d.consoleURL = consoleURL(ln.Addr())
	d.api = httpapi.New(httpapi.Options{Backend: httpBackend{d}, Logger: d.log.With("module", "http"),
		MaxStreams: int(cfg.Int("http.maxStreams")), MaxStreamsPerToken: int(cfg.Int("http.maxStreamsPerToken")),
		Console: console.Handler(),
		Metrics: d.metricsHandler(), MetricsPublic: cfg.Bool("metrics.public"),
		MaxUploadBytes: cfg.Int("exec.maxUploadBytes"),
		UploadIdle:     time.Duration(cfg.Int("exec.transferIdleMs")) * time.Millisecond,
		Health:         d.Health,
		MaxMCPSessions: int(cfg.Int("http.maxMcpSessions")), MaxMCPSessionsPerToken: int(cfg.Int("http.maxMcpSessionsPerToken")),
		MCPSessionIdle: time.Duration(cfg.Int("http.mcpSessionIdleMs")) * time.Millisecond, MCP: d.mcpStart(),
		Follow: d.following, LeaderRoots: d.leaderRoots()})
	d.httpSrv = &http.Server{
		Handler:           d.api,
		ReadHeaderTimeout: d.opts.HTTPHeaderTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		// A keep-alive connection with nothing asked of it for this long
		// is closed; the body of a request has its own bound (decodeBody).
		IdleTimeout: d.opts.HTTPIdleTimeout,
		ErrorLog:    nil,
	}
	go func() {
		if err := d.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("http server", "err", err)
		}
	}()
	d.log.Info("http api listening", "url", d.httpURL)
	return nil
}

// httpMaxHeaderBytes bounds a request's line and headers, read before its
// token is checked: a bearer token and a file route's path take a few
// hundred bytes, and net/http's own default (1 MiB) would let anyone who
// reaches the port hold that much per connection.
const httpMaxHeaderBytes = 64 << 10

// consoleURL is the console's address for a listener on addr: a listener
// on every address is reached at localhost; an IPv6 host is bracketed.
func consoleURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// closeHTTP ends event streams first, lets short calls finish briefly, then
// closes every connection, which ends the waits still parked.
func (d *Daemon) closeHTTP() {
	if d.httpSrv == nil {
		return
	}
	d.api.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := d.httpSrv.Shutdown(ctx); err != nil {
		_ = d.httpSrv.Close()
	}
}

// httpBackend is the daemon as the HTTP API sees it.
type httpBackend struct{ d *Daemon }

func (b httpBackend) Authenticate(ctx context.Context, secret string) (contract.TokenRecord, error) {
	select {
	case <-b.d.storeReady:
	case <-ctx.Done():
		return contract.TokenRecord{}, contract.Errorf(contract.CodeCancelled, "the request ended while the daemon's store was opening")
	}
	if b.d.tokens == nil {
		// Not a verdict on the token: there is no book to read it in.
		return contract.TokenRecord{}, contract.Errorf(contract.CodeDaemonStartupFailed, "the daemon's store could not be opened, so no token can be checked; the daemon is stopping (its log says why)")
	}
	tok, ok := b.d.tokens.lookup(secret)
	if !ok {
		return contract.TokenRecord{}, contract.Errorf(contract.CodeUnauthenticated, "unknown or revoked token")
	}
	return tok, nil
}

// Call runs one operation as a session of tok that lasts as long as ctx.
func (b httpBackend) Call(ctx context.Context, tok contract.TokenRecord, op contract.Op, input any, push func(contract.Push)) (any, error) {
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, contract.Errorf(contract.CodeBadRequest, "encode input: %v", err)
	}
	sctx, end := context.WithCancel(ctx)
	s := newSession(b.d, sctx, tok.SessionRole(), tok.ID, push, end)
	s.remote = true
	context.AfterFunc(sctx, func() { b.d.dropSession(s) })
	res, err := s.dispatch(sctx, nil, op, raw)
	if err != nil {
		return nil, err
	}
	if after, ok := res.(afterSend); ok {
		after.afterSend()
	}
	return res, nil
}

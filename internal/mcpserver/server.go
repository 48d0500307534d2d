// Package mcpserver is `simlock mcp`: a Model Context Protocol server on
// stdio that gives an agent simlock's leasing as tools. It is a client of
// the daemon like the CLI: it asks the daemon for devices as the agent,
// follows its requests and reports each step as progress, keeps the leases
// it was granted alive, and releases them when it exits.
//
// Waits are bounded: many MCP clients give up on a tool call after about a
// minute, so lease_simulator returns "pending" after waitSeconds and the
// request stays in line; wait_for_lease picks the wait up again.
package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/httpapi"
)

// Options configure the server.
type Options struct {
	// Dial opens a session with the daemon as AgentID. With autostart it
	// starts the daemon when nothing listens; the renewals never do, so a
	// stopped daemon is not brought back just to renew.
	Dial    func(ctx context.Context, autostart bool) (*client.Client, error)
	AgentID string
	Version string
	// Logger writes to stderr (stdout carries JSON-RPC only).
	Logger *slog.Logger
	// Tick is how often a wait refreshes its progress message; 0 means 5 s.
	Tick time.Duration
	// LeasesOutliveSession keeps the session's leases when it ends: they
	// are no longer renewed, and not released either (a session of /mcp,
	// whose leases belong to its token, not to the session). Its waiting
	// requests are withdrawn all the same, except those made with a client
	// key, which keep their place for a repeated call to join.
	LeasesOutliveSession bool
	// LocalFiles lets install_app read an app by its path on this
	// machine: only for the stdio server, which runs where its client
	// does. Off for /mcp, a remote surface, which never reaches a host
	// path.
	LocalFiles bool
	// UploadURL gives one-time upload URLs (app_upload_url): set for a
	// session of /mcp, nil on stdio, where install_app reads a path.
	UploadURL httpapi.MintUpload
}

// shutdownBound is how long releasing everything at exit may take.
const shutdownBound = 10 * time.Second

// Run serves one MCP session on t until the client closes it or ctx ends,
// then releases every lease the session holds (unless
// Options.LeasesOutliveSession) and withdraws its waiting requests.
func Run(ctx context.Context, opts Options, t mcp.Transport) error {
	sess, err := Start(opts, t)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		sess.Close()
	case <-sess.Done():
	}
	<-sess.Done()
	return nil
}

// Session is one MCP session served on a transport (Start). Its methods
// are safe to call concurrently.
type Session struct {
	ss      *mcp.ServerSession
	done    chan struct{}
	closing context.CancelFunc
}

// Start connects an MCP session on t and serves it in the background until
// the client ends it or Close is called; then the session's end runs as in
// Run and Done is closed.
func Start(opts Options, t mcp.Transport) (*Session, error) {
	s := newServer(opts)
	srv := mcp.NewServer(&mcp.Implementation{Name: "simlock", Title: "simlock device leases", Version: opts.Version},
		&mcp.ServerOptions{Instructions: instructions, Logger: s.log})
	s.register(srv)
	// Warnings about lost leases are sent whether or not the client ever
	// set a log level: an agent must hear that its device is gone.
	ss, err := srv.Connect(context.Background(), quietCancels{t}, &mcp.ServerSessionOptions{State: &mcp.ServerSessionState{LogLevel: "info"}})
	if err != nil {
		s.end()
		return nil, err
	}
	s.setSession(ss)
	sess := &Session{ss: ss, done: make(chan struct{}), closing: s.close}
	go func() {
		defer close(sess.done)
		err := ss.Wait()
		s.shutdown()
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Debug("session ended", "err", err)
		}
	}()
	return sess, nil
}

// Close ends the session; Done is closed once its end has run.
func (s *Session) Close() {
	s.closing()
	_ = s.ss.Close()
}

// Done is closed once the session has ended and let go of what it held.
func (s *Session) Done() <-chan struct{} { return s.done }

// Initialized reports whether the client has completed the initialize
// handshake.
func (s *Session) Initialized() bool { return s.ss.InitializeParams() != nil }

const instructions = `simlock hands out iOS simulators and Android emulators that no other agent touches while you hold them.
Call lease_simulator to get one; if it answers "pending", call wait_for_lease with the requestId until it answers with the lease.
Use the device through the address and environment in the grant. This server renews your lease while it runs and releases it when it exits; call release_simulator as soon as you are done so others can have the device.`

// server is one MCP session's state.
type server struct {
	opts Options
	log  *slog.Logger
	// life ends at shutdown; background loops (renewals, request
	// followers) run under it.
	life context.Context
	end  context.CancelFunc
	// closing ends when Session.Close is called: calls still waiting end
	// (and withdraw their requests) so that the session can end.
	closing context.Context
	close   context.CancelFunc

	mu       sync.Mutex
	ss       *mcp.ServerSession
	c        *client.Client
	held     map[string]*heldLease
	requests map[string]*tracked
	// gone remembers how leases this session held ended, for lease_status.
	gone map[string]string
	// lastGone is the lease of gone that ended last, for a lease_status
	// that names none.
	lastGone string
}

func newServer(opts Options) *server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Tick <= 0 {
		opts.Tick = 5 * time.Second
	}
	life, end := context.WithCancel(context.Background())
	closing, closeFn := context.WithCancel(life)
	return &server{
		opts: opts, log: opts.Logger, life: life, end: end, closing: closing, close: closeFn,
		held: map[string]*heldLease{}, requests: map[string]*tracked{}, gone: map[string]string{},
	}
}

func (s *server) setSession(ss *mcp.ServerSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ss = ss
}

func (s *server) session() *mcp.ServerSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ss
}

// daemon returns the session with the daemon, dialling a new one when there
// is none or the last one was lost. A new session watches the leases held
// so far, so it hears when the daemon ends one.
func (s *server) daemon(ctx context.Context, autostart bool) (*client.Client, error) {
	s.mu.Lock()
	if c := s.c; c != nil {
		select {
		case <-c.Done():
			s.c = nil
		default:
			s.mu.Unlock()
			return c, nil
		}
	}
	s.mu.Unlock()
	c, err := s.opts.Dial(ctx, autostart)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if cur := s.c; cur != nil {
		s.mu.Unlock()
		c.Close()
		return cur, nil
	}
	s.c = c
	ids := make([]string, 0, len(s.held))
	for id := range s.held {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	go s.hearLoss(c)
	for _, id := range ids {
		s.watch(ctx, c, id)
	}
	return c, nil
}

// watch asks the daemon to tell this session when lease id ends.
func (s *server) watch(ctx context.Context, c *client.Client, id string) {
	var res contract.LeaseWatchResult
	if err := c.Call(ctx, contract.OpLeaseWatch, contract.LeaseIDInput{LeaseID: id}, &res); err != nil {
		if contract.AsError(err).Code == contract.CodeUnknownLease {
			s.lost(id, "", "ended")
			return
		}
		s.log.Warn("could not watch lease", "leaseId", id, "err", err)
	}
}

// hearLoss turns the daemon's lease-lost notices into warnings.
func (s *server) hearLoss(c *client.Client) {
	for {
		select {
		case in := <-c.LeaseLost():
			switch in.Push {
			case contract.PushDeviceUnhealthy, contract.PushDeviceRecovered:
				s.deviceNotice(in)
			default:
				s.lost(in.LeaseID, in.DeviceID, in.Reason)
			}
		case <-c.Done():
			return
		case <-s.life.Done():
			return
		}
	}
}

// shutdown releases every held lease (unless LeasesOutliveSession) and
// withdraws every waiting request, within shutdownBound, then stops the
// background loops.
func (s *server) shutdown() {
	s.mu.Lock()
	var leases, reqs []string
	for id, h := range s.held {
		if !s.opts.LeasesOutliveSession {
			leases = append(leases, id)
		}
		h.stop()
	}
	s.held = map[string]*heldLease{}
	for id, t := range s.requests {
		if !t.settled() && !t.keptAtEnd(s.opts.LeasesOutliveSession) {
			reqs = append(reqs, id)
		}
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownBound)
	defer cancel()
	defer s.end()
	if len(leases) == 0 && len(reqs) == 0 {
		return
	}
	c, err := s.daemon(ctx, false)
	if err != nil {
		s.log.Warn("could not reach the daemon to release leases at exit", "err", err)
		return
	}
	for _, id := range reqs {
		res, err := c.Cancel(ctx, contract.LeaseCancelInput{RequestID: id})
		if err != nil || res.Outcome != contract.CancelNotCancellable {
			continue
		}
		// Its device is being readied: wait for the grant, then give it back.
		if lease := settledLease(ctx, c, id, res.LeaseID); lease != "" {
			leases = append(leases, lease)
		}
	}
	for _, id := range leases {
		if _, err := c.Release(ctx, id); err != nil && contract.AsError(err).Code != contract.CodeUnknownLease {
			s.log.Warn("could not release lease at exit", "leaseId", id, "err", err)
		}
	}
	c.Close()
}

// settledLease waits (within ctx) for a request whose device is being
// readied to settle and returns the lease it was granted, if any.
func settledLease(ctx context.Context, c *client.Client, requestID, known string) string {
	if known != "" {
		return known
	}
	var rev uint64
	for ctx.Err() == nil {
		var st contract.LeaseRequestStatus
		in := contract.LeaseRequestGetInput{RequestID: requestID, AfterRev: rev, WaitMs: contract.MaxRequestWaitMs}
		if err := c.Call(ctx, contract.OpLeaseRequestGet, in, &st); err != nil {
			return ""
		}
		if st.Request.State.Terminal() {
			return st.Request.LeaseID
		}
		rev = st.Rev
	}
	return ""
}

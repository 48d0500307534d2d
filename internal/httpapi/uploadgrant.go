package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// One-time upload URLs. An MCP client cannot stream a file through a tool
// call, and one carries at most 16 MiB inline; for a larger app its session
// asks for an upload URL (MintUpload), and the client POSTs the app's bytes
// there with no token: POST /v1/leases/{id}/apps?upload=<secret>. The secret
// acts as the token that asked for it, once, for that lease only, until it
// expires or the token ends. Grants live in this server's memory: a restart
// forgets them, and the client asks again.

// The bounds of the grants.
const (
	// uploadGrantTTL is how long a grant may wait to be used.
	uploadGrantTTL = 10 * time.Minute
	// maxUploadGrants and maxUploadGrantsPerToken bound the grants
	// outstanding, so that a token cannot fill the server's memory.
	maxUploadGrants         = 1024
	maxUploadGrantsPerToken = 16
)

// uploadQuery is the query parameter that carries a grant's secret.
const uploadQuery = "upload"

// UploadGrant is a one-time upload URL, as a tool answers it.
type UploadGrant struct {
	URL       string
	ExpiresAt time.Time
	// MaxBytes is the largest body the URL takes (exec.maxUploadBytes).
	MaxBytes int64
}

// MintUpload gives a one-time upload URL for an app to install on lease
// leaseID, acting as the MCP session's token. It refuses a lease the token
// may not act on with the error the daemon gives (UNKNOWN_LEASE, FORBIDDEN).
type MintUpload func(ctx context.Context, leaseID string) (UploadGrant, error)

// uploadGrant is what a secret grants.
type uploadGrant struct {
	tok     contract.TokenRecord
	leaseID string
	expires time.Time
}

// uploadGrants is the table of outstanding grants. It is safe for
// concurrent use.
type uploadGrants struct {
	now              func() time.Time
	ttl              time.Duration
	max, maxPerToken int

	mu sync.Mutex
	// mu guards the fields below: the grants by secret, and how many each
	// token has.
	bySecret map[string]uploadGrant
	perToken map[string]int
}

func newUploadGrants(now func() time.Time) *uploadGrants {
	return &uploadGrants{
		now: now, ttl: uploadGrantTTL, max: maxUploadGrants, maxPerToken: maxUploadGrantsPerToken,
		bySecret: map[string]uploadGrant{}, perToken: map[string]int{},
	}
}

// mint records a grant of tok for leaseID and returns its secret: 32
// random bytes in hex.
func (g *uploadGrants) mint(tok contract.TokenRecord, leaseID string) (secret string, expires time.Time, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	g.dropExpiredLocked(now)
	switch {
	case len(g.bySecret) >= g.max:
		return "", time.Time{}, contract.Errorf(contract.CodeTooManyStreams, "%d upload URLs are outstanding, the most the daemon keeps; use one or try again later", len(g.bySecret)).
			With("maxUploadUrls", g.max)
	case g.perToken[tok.ID] >= g.maxPerToken:
		return "", time.Time{}, contract.Errorf(contract.CodeTooManyStreams, "this token has %d upload URLs outstanding, the most one token may; use one, or let one expire (%s)", g.perToken[tok.ID], g.ttl).
			With("maxUploadUrlsPerToken", g.maxPerToken)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	secret = hex.EncodeToString(b)
	expires = now.Add(g.ttl)
	g.bySecret[secret] = uploadGrant{tok: tok, leaseID: leaseID, expires: expires}
	g.perToken[tok.ID]++
	return secret, expires, nil
}

// redeem takes the grant of secret for leaseID, once: it reports the token
// the upload acts as, and forgets the grant. A secret that is unknown,
// used, expired, or another lease's is refused alike; another lease's is
// kept for its own.
func (g *uploadGrants) redeem(secret, leaseID string) (contract.TokenRecord, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gr, ok := g.bySecret[secret]
	if !ok || gr.leaseID != leaseID {
		return contract.TokenRecord{}, false
	}
	g.forgetLocked(secret, gr)
	if !g.now().Before(gr.expires) {
		return contract.TokenRecord{}, false
	}
	return gr.tok, true
}

// endToken forgets every grant of token id.
func (g *uploadGrants) endToken(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for secret, gr := range g.bySecret {
		if gr.tok.ID == id {
			g.forgetLocked(secret, gr)
		}
	}
}

// dropExpiredLocked forgets the grants expired at now.
func (g *uploadGrants) dropExpiredLocked(now time.Time) {
	for secret, gr := range g.bySecret {
		if !now.Before(gr.expires) {
			g.forgetLocked(secret, gr)
		}
	}
}

func (g *uploadGrants) forgetLocked(secret string, gr uploadGrant) {
	delete(g.bySecret, secret)
	if g.perToken[gr.tok.ID]--; g.perToken[gr.tok.ID] <= 0 {
		delete(g.perToken, gr.tok.ID)
	}
}

// errUploadGrant is the one answer to an upload URL that does not admit the
// request, whatever the reason, so that it tells a guesser nothing.
var errUploadGrant = contract.Errorf(contract.CodeUnauthenticated,
	"this upload URL is not valid: an upload URL is used once, for its lease, before it expires; ask for a new one (app_upload_url)")

// uploadMinter is the MintUpload of an MCP session of tok opened by r: its
// URLs start with the base URL the client reached this server at.
func (s *Server) uploadMinter(r *http.Request, tok contract.TokenRecord) MintUpload {
	base := baseURL(r)
	return func(ctx context.Context, leaseID string) (UploadGrant, error) {
		if err := (&contract.LeaseIDInput{LeaseID: leaseID}).Validate(); err != nil {
			return UploadGrant{}, err
		}
		// The lease must be one the token may act on: the daemon decides,
		// as for every call of the token.
		if _, err := s.be.Call(ctx, tok, contract.OpLeaseGet, contract.LeaseIDInput{LeaseID: leaseID}, nil); err != nil {
			return UploadGrant{}, err
		}
		if s.tokenEnded(tok.ID) {
			return UploadGrant{}, errTokenRevoked
		}
		secret, expires, err := s.uploads.mint(tok, leaseID)
		if err != nil {
			return UploadGrant{}, err
		}
		if s.tokenEnded(tok.ID) {
			// Ended while minting: EndToken may have swept before this
			// grant was recorded.
			s.uploads.endToken(tok.ID)
			return UploadGrant{}, errTokenRevoked
		}
		u := base + "/v1/leases/" + url.PathEscape(leaseID) + "/apps?" + uploadQuery + "=" + secret
		return UploadGrant{URL: u, ExpiresAt: expires, MaxBytes: s.maxUpload}, nil
	}
}

// tokenEnded reports whether EndToken ended the token with this id.
func (s *Server) tokenEnded(id string) bool {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	_, ended := s.endedToks[id]
	return ended
}

// baseURL is the scheme and host r reached this server at. The scheme is
// https under TLS; a proxy on this machine (a request from loopback) may
// say, with X-Forwarded-Proto, that the client used TLS to reach it. No
// other peer's word on it is taken.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	} else if fromLoopback(r) {
		switch p := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto"))); p {
		case "http", "https":
			scheme = p
		}
	}
	return scheme + "://" + r.Host
}

// fromLoopback reports whether r came from this machine's loopback.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// grantable serves a route that a one-time upload URL may call: a request
// with no Authorization header and an upload query parameter acts as the
// token of the grant it redeems, with the parameter taken out of the
// request; any other request is served as h's route is (authed).
func (s *Server) grantable(acc access, h handlerFunc) http.HandlerFunc {
	byToken := s.authed(acc, h)
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Header.Get("Authorization") != "" || !q.Has(uploadQuery) {
			byToken(w, r)
			return
		}
		secrets := q[uploadQuery]
		q.Del(uploadQuery)
		// The secret leaves the request here: nothing after this point
		// (the handler, a log line) sees it.
		r = r.WithContext(r.Context())
		u := *r.URL
		u.RawQuery = q.Encode()
		r.URL = &u
		r.RequestURI = u.RequestURI()
		tok, ok := contract.TokenRecord{}, false
		if len(secrets) == 1 {
			tok, ok = s.uploads.redeem(secrets[0], r.PathValue("id"))
		}
		if ok && s.tokenEnded(tok.ID) {
			ok = false
		}
		s.authedBy(func(*http.Request) (contract.TokenRecord, error) {
			if !ok {
				return contract.TokenRecord{}, errUploadGrant
			}
			return tok, nil
		}, acc, h)(w, r)
	}
}

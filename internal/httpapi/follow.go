package httpapi

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// FollowFunc says whether the daemon is a gateway replica that does not
// lead (following), and who leads as it last saw it: the leadership read
// from the database, never anything a client sent.
type FollowFunc func() (l contract.Leadership, following bool)

// The bounds of a follower's proxy to its leader. A dial that takes longer
// than leaderDialTimeout is a leader that is gone; the answer's headers may
// take as long as the API's own client waits for them (a long poll holds
// them up to 60 s, an app install until it is installed). Once the
// headers are in, a stream (events, an exec's output) is not bounded.
const (
	leaderDialTimeout   = 5 * time.Second
	leaderHeaderTimeout = 2 * time.Minute
)

// ForwardedHeader marks a request one replica forwarded to the replica it
// saw leading. A replica that does not lead and gets one answers
// NOT_LEADER rather than forward it again: two replicas whose views of the
// leader lag, each seeing the other lead for a moment, do not pass a
// request between them.
const ForwardedHeader = "Simlock-Forwarded"

// answersItself reports whether a replica that does not lead serves path
// itself: the probes and metrics (its own), its status (which says whom it
// follows) and the uplink (which it refuses, naming the leader). Every
// other path, the console's too, is the leader's.
func answersItself(path string) bool {
	switch path {
	case "/livez", "/readyz", "/metrics", "/v1/status", "/v1/uplink":
		return true
	}
	return false
}

// follow is the HTTP API's gate on a gateway replica that does not lead,
// run before anything else reads the request. It reports whether it
// answered r: an uplink is refused NOT_LEADER with the leader's URL (and
// the backend told, as of any refused uplink); every path the replica does
// not answer itself goes to the leader through a reverse proxy, with its
// method, path, query, headers (Authorization too: the leader checks the
// token) and body, or is answered 503 NOT_LEADER while no leader is known
// or the leader does not answer, so that the client tries again.
func (s *Server) follow(w http.ResponseWriter, r *http.Request) bool {
	if s.following == nil {
		return false
	}
	l, following := s.following()
	if !following {
		return false
	}
	if r.URL.Path == "/v1/uplink" && r.Method == http.MethodGet {
		ce := contract.NotLeader(l)
		s.be.UplinkRefused(r, ce)
		s.writeError(w, r, ce)
		return true
	}
	if answersItself(r.URL.Path) {
		return false
	}
	target, ok := leaderOrigin(l)
	if !ok || r.Header.Get(ForwardedHeader) != "" {
		s.writeError(w, r, contract.NotLeader(l))
		return true
	}
	s.proxyTo(target, l).ServeHTTP(w, r)
	return true
}

// leaderOrigin is the leader's advertised URL as a proxy target, or false
// when none leads, or when the database names this replica itself (it won
// and has not yet taken over): forwarding then would loop back here.
func leaderOrigin(l contract.Leadership) (*url.URL, bool) {
	if l.LeaderURL == "" || l.LeaderURL == l.Self {
		return nil, false
	}
	u, err := url.Parse(l.LeaderURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false
	}
	return &url.URL{Scheme: u.Scheme, Host: u.Host}, true
}

// proxyTo is the reverse proxy of one request to the leader at target.
// Streams flow as they are written (FlushInterval -1); a WebSocket upgrade
// is passed through. A leader that cannot be reached, or does not answer
// within the bounds, is NOT_LEADER: the client tries again, and by then a
// replica may have taken over.
func (s *Server) proxyTo(target *url.URL, l contract.Leadership) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(ForwardedHeader, "1")
		},
		Transport:     s.toLeader,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				s.log.Warn("the leader did not answer a forwarded request", "leader", l.LeaderURL, "term", l.Term, "method", r.Method, "path", r.URL.Path, "err", err)
			}
			s.writeError(w, r, contract.NotLeader(l))
		},
	}
}

// leaderTransport is the proxy's transport: bounded dial, TLS handshake
// and wait for the answer's headers; roots are the certificate roots an
// https leader is checked against (the system's when nil). It speaks
// HTTP/1.1, which carries a WebSocket upgrade, and dials the leader
// directly: the replicas reach each other, not through a proxy of the
// environment.
func leaderTransport(roots *x509.CertPool) *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: leaderDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots},
		TLSHandshakeTimeout:   leaderDialTimeout,
		ResponseHeaderTimeout: leaderHeaderTimeout,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   32,
	}
}

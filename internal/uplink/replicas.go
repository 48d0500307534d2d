package uplink

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// LeaderURL is the leader a refusing replica named: the leaderUrl of a
// NOT_LEADER refusal, "" for any other refusal or while no replica leads.
func (e *RefusedError) LeaderURL() string {
	if e.Code != contract.CodeNotLeader {
		return ""
	}
	s, _ := e.Details["leaderUrl"].(string)
	return s
}

// SameGateway reports whether a and b are the same gateway address: the
// same scheme, host (in any case) and port (the scheme's own when none is
// written), with or without a trailing slash.
func SameGateway(a, b string) bool {
	ka, oka := gatewayKey(a)
	kb, okb := gatewayKey(b)
	return oka && okb && ka == kb
}

func gatewayKey(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		default:
			return "", false
		}
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port + strings.TrimRight(u.EscapedPath(), "/"), true
}

// DialFunc dials one gateway address (Dial with the worker's name and
// token bound).
type DialFunc func(ctx context.Context, gatewayURL string) (*Conn, error)

// DialFirst is one round over a worker's gateway replicas: it dials urls
// in order and returns the first uplink made, with the URL it was made to.
// A replica that refuses NOT_LEADER naming a leader that is one of urls
// sends the round to that leader at once; a leader outside urls is not
// dialled (the join token goes only where the worker's config says): it
// is told to foreign, if set, and the round goes on with the next URL.
// Each URL is dialled at most once a round, so replicas that name each
// other cannot keep a round going, and each dial is bounded by each, so a
// replica whose machine is gone (no answer at all) leaves time for the
// next; when every one failed, the error joins their errors and the caller
// backs off before the next round.
func DialFirst(ctx context.Context, urls []string, each time.Duration, dial DialFunc, foreign func(leaderURL string)) (*Conn, string, error) {
	tried := make([]bool, len(urls))
	var errs []error
	next := 0
	for {
		i := next
		for i < len(urls) && tried[i] {
			i++
		}
		if i == len(urls) {
			if len(errs) == 0 {
				return nil, "", errors.New("uplink: no gateway to dial")
			}
			return nil, "", errors.Join(errs...)
		}
		tried[i] = true
		dctx, cancel := context.WithTimeout(ctx, each)
		c, err := dial(dctx, urls[i])
		cancel()
		if err == nil {
			return c, urls[i], nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			return nil, "", errors.Join(errs...)
		}
		next = 0 // the untried URLs still go in order after a hint
		var re *RefusedError
		if errors.As(err, &re) && re.LeaderURL() != "" {
			if j := index(urls, re.LeaderURL()); j >= 0 {
				if !tried[j] {
					next = j
				}
			} else if foreign != nil {
				foreign(re.LeaderURL())
			}
		}
	}
}

func index(urls []string, u string) int {
	for i, v := range urls {
		if SameGateway(v, u) {
			return i
		}
	}
	return -1
}

// Redial runs a worker's rounds until ctx ends: round dials (DialFirst)
// and serves the uplink it made until it ends, and says how long it was up
// (0 when no dial succeeded). After each round it waits the backoff's next
// delay (told to ended first), so a worker whose replicas all refuse it
// asks ever less often and never in a tight loop.
func Redial(ctx context.Context, b *Backoff, round func() (up time.Duration, err error), ended func(err error, wait time.Duration)) {
	for ctx.Err() == nil {
		up, err := round()
		if ctx.Err() != nil {
			return
		}
		b.Ended(up)
		wait := b.Next()
		if ended != nil {
			ended(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

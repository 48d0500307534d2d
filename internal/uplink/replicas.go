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

// DialStagger is how long a dial of one replica goes unanswered before
// DialFirst dials the next URL beside it: a replica whose machine is gone
// or frozen (nothing answers, not even a refusal) does not hold a worker
// back from the others for its whole bound.
const DialStagger = time.Second

// DialFirst is one round over a worker's gateway replicas: it dials urls
// in order and returns the first uplink made, with the URL it was made to.
// A replica that refuses NOT_LEADER naming a leader that is one of urls
// sends the round to that leader at once; a leader outside urls is not
// dialled (the join token goes only where the worker's config says): it
// is told to foreign, if set, and the round goes on with the next URL.
// Each URL is dialled at most once a round, so replicas that name each
// other cannot keep a round going; each dial is bounded by each, and one
// unanswered for DialStagger gets the next URL dialled beside it, so a
// replica whose machine is gone holds the round for a second, not for its
// bound. The first uplink made wins; the dials still out are cancelled
// and an uplink one of them makes after all is closed. When every one
// failed, the error joins their errors and the caller backs off before
// the next round.
func DialFirst(ctx context.Context, urls []string, each time.Duration, dial DialFunc, foreign func(leaderURL string)) (*Conn, string, error) {
	if len(urls) == 0 {
		return nil, "", errors.New("uplink: no gateway to dial")
	}
	type result struct {
		i   int
		c   *Conn
		err error
	}
	round, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan result, len(urls)) // no dial ever blocks on it
	tried := make([]bool, len(urls))
	out := 0
	start := func(i int) {
		tried[i] = true
		out++
		go func() {
			dctx, cancel := context.WithTimeout(round, each)
			defer cancel()
			c, err := dial(dctx, urls[i])
			results <- result{i, c, err}
		}()
	}
	untried := func() int {
		for i, t := range tried {
			if !t {
				return i
			}
		}
		return -1
	}
	stagger := time.NewTimer(DialStagger)
	defer stagger.Stop()
	start(0)
	var errs []error
	for out > 0 {
		select {
		case r := <-results:
			out--
			if r.err == nil {
				cancel()
				go func(n int) { // what the cancelled dials make after all
					for range n {
						if late := <-results; late.c != nil {
							late.c.Close()
						}
					}
				}(out)
				return r.c, urls[r.i], nil
			}
			errs = append(errs, r.err)
			if ctx.Err() != nil {
				continue // the dials out end with ctx; their errors are joined
			}
			next := -1
			var re *RefusedError
			if errors.As(r.err, &re) && re.LeaderURL() != "" {
				if j := index(urls, re.LeaderURL()); j >= 0 {
					if !tried[j] {
						next = j
					}
				} else if foreign != nil {
					foreign(re.LeaderURL())
				}
			}
			if next < 0 && out == 0 {
				next = untried() // the untried URLs still go in order after a hint
			}
			if next >= 0 {
				start(next)
				stagger.Reset(DialStagger)
			}
		case <-stagger.C:
			if next := untried(); next >= 0 && ctx.Err() == nil {
				start(next)
				stagger.Reset(DialStagger)
			}
		}
	}
	return nil, "", errors.Join(errs...)
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

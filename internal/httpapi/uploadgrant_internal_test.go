package httpapi

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

var (
	grantTokA = contract.TokenRecord{ID: "tok_a", Role: contract.TokenAgent}
	grantTokB = contract.TokenRecord{ID: "tok_b", Role: contract.TokenAgent}
)

// grantClock is an injected clock the test moves by hand.
type grantClock struct{ t time.Time }

func (c *grantClock) now() time.Time { return c.t }

func newGrantTable() (*uploadGrants, *grantClock) {
	c := &grantClock{t: time.Unix(1_700_000_000, 0)}
	return newUploadGrants(c.now), c
}

func mustMint(t *testing.T, g *uploadGrants, tok contract.TokenRecord, lease string) string {
	t.Helper()
	secret, _, err := g.mint(tok, lease)
	if err != nil {
		t.Fatalf("mint for %s on %s: %v", tok.ID, lease, err)
	}
	return secret
}

// A grant is redeemed once, for its lease, as its token; a second
// redemption of the same secret is refused.
func TestAnUploadGrantIsRedeemedOnceForItsLease(t *testing.T) {
	g, _ := newGrantTable()
	secret := mustMint(t, g, grantTokA, "lse_1")
	if len(secret) != 64 {
		t.Errorf("secret %q: want 32 random bytes in hex (64 characters)", secret)
	}
	if _, ok := g.redeem(secret, "lse_other"); ok {
		t.Errorf("redeemed for another lease; want refused")
	}
	tok, ok := g.redeem(secret, "lse_1")
	if !ok || tok.ID != grantTokA.ID {
		t.Fatalf("redeem for its lease = %v %v, want the minting token %s", tok.ID, ok, grantTokA.ID)
	}
	if _, ok := g.redeem(secret, "lse_1"); ok {
		t.Errorf("redeemed a second time; want refused")
	}
	if _, ok := g.redeem("", "lse_1"); ok {
		t.Errorf("redeemed an empty secret; want refused")
	}
	if n := len(g.bySecret) + len(g.perToken); n != 0 {
		t.Errorf("after its use the table holds %d entries, want none", n)
	}
}

// A grant is refused from its expiry on, and an expired grant no longer
// counts against the bounds.
func TestAnUploadGrantExpires(t *testing.T) {
	g, clock := newGrantTable()
	secret := mustMint(t, g, grantTokA, "lse_1")
	clock.t = clock.t.Add(uploadGrantTTL - time.Second)
	late := mustMint(t, g, grantTokA, "lse_1")
	clock.t = clock.t.Add(time.Second)
	if _, ok := g.redeem(secret, "lse_1"); ok {
		t.Errorf("redeemed at its expiry; want refused")
	}
	if _, ok := g.redeem(late, "lse_1"); !ok {
		t.Errorf("a grant minted later was refused before its own expiry")
	}
	g.maxPerToken = 1
	expiring := mustMint(t, g, grantTokA, "lse_1")
	clock.t = clock.t.Add(uploadGrantTTL)
	mustMint(t, g, grantTokA, "lse_1") // the expired one no longer counts
	if _, ok := g.bySecret[expiring]; ok {
		t.Errorf("an expired grant was kept past the next mint")
	}
}

// Ending a token forgets its grants and no other token's.
func TestEndingATokenForgetsItsUploadGrants(t *testing.T) {
	g, _ := newGrantTable()
	a := mustMint(t, g, grantTokA, "lse_1")
	b := mustMint(t, g, grantTokB, "lse_2")
	g.endToken(grantTokA.ID)
	if _, ok := g.redeem(a, "lse_1"); ok {
		t.Errorf("a revoked token's grant was redeemed")
	}
	if tok, ok := g.redeem(b, "lse_2"); !ok || tok.ID != grantTokB.ID {
		t.Errorf("another token's grant = %v %v, want still redeemable", tok.ID, ok)
	}
}

// The grants outstanding are bounded per token and in all, with
// TOO_MANY_STREAMS; a used grant gives its place back.
func TestUploadGrantsAreBounded(t *testing.T) {
	g, _ := newGrantTable()
	g.max, g.maxPerToken = 3, 2
	first := mustMint(t, g, grantTokA, "lse_1")
	mustMint(t, g, grantTokA, "lse_1")
	if _, _, err := g.mint(grantTokA, "lse_1"); err == nil || contract.AsError(err).Code != contract.CodeTooManyStreams {
		t.Errorf("a token's third grant: %v, want TOO_MANY_STREAMS", err)
	}
	mustMint(t, g, grantTokB, "lse_2")
	if _, _, err := g.mint(grantTokB, "lse_2"); err == nil || contract.AsError(err).Code != contract.CodeTooManyStreams {
		t.Errorf("a grant over the total: %v, want TOO_MANY_STREAMS", err)
	}
	if _, ok := g.redeem(first, "lse_1"); !ok {
		t.Fatal("redeem the first grant")
	}
	mustMint(t, g, grantTokA, "lse_1")
}

// An upload URL's base is the one the client reached: https under TLS,
// X-Forwarded-Proto believed only from loopback.
func TestUploadURLBase(t *testing.T) {
	for _, tc := range []struct {
		name, remote, proto string
		tls                 bool
		want                string
	}{
		{"plain", "203.0.113.5:4000", "", false, "http://api.example:7070"},
		{"tls", "203.0.113.5:4000", "", true, "https://api.example:7070"},
		{"proxy on loopback", "127.0.0.1:4000", "https", false, "https://api.example:7070"},
		{"proxy on v6 loopback", "[::1]:4000", "HTTPS", false, "https://api.example:7070"},
		{"a remote peer's word is not taken", "203.0.113.5:4000", "https", false, "http://api.example:7070"},
		{"an unknown scheme is not taken", "127.0.0.1:4000", "javascript", false, "http://api.example:7070"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://api.example:7070/mcp", nil)
			r.RemoteAddr = tc.remote
			if tc.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tc.proto)
			}
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if got := baseURL(r); got != tc.want {
				t.Errorf("baseURL = %q, want %q", got, tc.want)
			}
		})
	}
}

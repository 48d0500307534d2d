package queue

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// The front desk checks a request's TTL before anything is resolved or
// stored: a request naming none gets the configured default, one inside
// the bounds keeps its own, and one outside them is BAD_REQUEST naming
// the bound, with nothing stored and the placer never asked. Both modes
// reach this one check through their Desk.
func TestDeskBoundsTheTTLBeforeAnythingIsStored(t *testing.T) {
	const def, lo, hi = 15 * time.Minute, 10 * time.Second, 4 * time.Hour
	for _, c := range []struct {
		name   string
		ttlMs  int64
		wantMs int64  // the stored request's ttlMs
		bound  string // the detail a refusal carries
	}{
		{"none named takes the default", 0, def.Milliseconds(), ""},
		{"the minimum itself", lo.Milliseconds(), lo.Milliseconds(), ""},
		{"the maximum itself", hi.Milliseconds(), hi.Milliseconds(), ""},
		{"below the minimum", lo.Milliseconds() - 1, 0, "minTtlMs"},
		{"above the maximum", hi.Milliseconds() + 1, 0, "maxTtlMs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			r.pl.instant = true
			r.pl.free[contract.PlatformIOS] = 1
			resolved := 0
			d := &Desk{Q: r.q, DefaultTTL: def, MinTTL: lo, MaxTTL: hi,
				Resolve: func(_ context.Context, in contract.LeaseRequestInput) Resolution {
					resolved++
					return Resolution{Need: need(in.Platform)}
				}}
			st, err := d.Submit(context.Background(), Caller{Principal: "a"},
				contract.LeaseRequestInput{Platform: contract.PlatformIOS, TTLMs: c.ttlMs})
			if c.bound != "" {
				ce := expectCode(t, "submit", err, contract.CodeBadRequest)
				if ce.Details["field"] != "ttlMs" || ce.Details[c.bound] == nil {
					t.Errorf("refusal details = %v, want field ttlMs and %s", ce.Details, c.bound)
				}
				if resolved != 0 {
					t.Errorf("the placer resolved a request refused for its TTL %d times, want 0", resolved)
				}
				if n := len(r.st.all()); n != 0 {
					t.Errorf("a request refused for its TTL left %d records, want 0", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			if st.Request.Policy.TTLMs != c.wantMs {
				t.Errorf("stored ttlMs = %d, want %d", st.Request.Policy.TTLMs, c.wantMs)
			}
			if st.Request.State != contract.RequestGranted {
				t.Errorf("state = %s, want granted", st.Request.State)
			}
		})
	}
}

// The desk takes the request's spec from its input (LeaseRequestInput.Spec)
// and gives the resolver the input as it came.
func TestDeskStoresTheSpecTheInputAsks(t *testing.T) {
	r := newRig(t)
	r.pl.instant = true
	r.pl.free[contract.PlatformAndroid] = 1
	in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid, Model: "pixel", Class: contract.ClassPhone, OSVersion: "14",
		ImageTag: "google_apis", Mode: contract.DeviceMode("full")}
	var got contract.LeaseRequestInput
	d := &Desk{Q: r.q, DefaultTTL: time.Minute, MaxTTL: time.Hour,
		Resolve: func(_ context.Context, in contract.LeaseRequestInput) Resolution {
			got = in
			return Resolution{Need: need(in.Platform)}
		}}
	st, err := d.Submit(context.Background(), Caller{Principal: "a"}, in)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if st.Request.Spec != in.Spec() {
		t.Errorf("stored spec = %+v, want %+v", st.Request.Spec, in.Spec())
	}
	if got.Model != "pixel" || got.ImageTag != "google_apis" {
		t.Errorf("the resolver was given %+v, want the input", got)
	}
}

package cli

import (
	"errors"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// A TTL or timeout must carry its unit: a bare number is USAGE with the
// unit it was likely meant in; every unit the docs list is still read.
func TestADurationFlagNeedsItsUnit(t *testing.T) {
	for _, tc := range []struct {
		flag, in string
		zeroOK   bool
		want     time.Duration
		err      string
	}{
		{"--ttl", "5", false, 0, "--ttl 5 has no unit; did you mean 5m? (a number with ms, s, m, h or d)"},
		{"--ttl", "1.5", false, 0, "--ttl 1.5 has no unit; did you mean 1.5m? (a number with ms, s, m, h or d)"},
		{"--ttl", "5000", false, 0, "--ttl 5000 has no unit; did you mean 5000ms? (a number with ms, s, m, h or d)"},
		{"--timeout", "30", true, 0, "--timeout 30 has no unit; did you mean 30m? (a number with ms, s, m, h or d)"},
		{"--ttl", "0", false, 0, "--ttl must be more than 0: a number with ms, s, m, h or d, such as 15m"},
		{"--timeout", "0", true, 0, ""},
		{"--ttl", "250ms", false, 250 * time.Millisecond, ""},
		{"--ttl", "30s", false, 30 * time.Second, ""},
		{"--ttl", "5m", false, 5 * time.Minute, ""},
		{"--ttl", "1.5h", false, 90 * time.Minute, ""},
		{"--timeout", "1d", true, 24 * time.Hour, ""},
		{"--ttl", "5x", false, 0, `--ttl: "5x" is not a duration (use a number with ms, s, m, h or d)`},
		{"--ttl", "-5m", false, 0, `--ttl: "-5m" is not a duration (use a number with ms, s, m, h or d)`},
		{"--ttl", "inf", false, 0, `--ttl: "inf" is not a duration (use a number with ms, s, m, h or d)`},
	} {
		got, err := durationFlag(tc.flag, tc.in, tc.zeroOK)
		if tc.err == "" {
			if err != nil || got != tc.want {
				t.Errorf("%s %s = %v, %v; want %v", tc.flag, tc.in, got, err, tc.want)
			}
			continue
		}
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 {
			t.Errorf("%s %s = %v, %v; want USAGE (exit 2)", tc.flag, tc.in, got, err)
			continue
		}
		if ce := contract.AsError(ee.err); ce.Code != contract.CodeUsage || ce.Message != tc.err {
			t.Errorf("%s %s: %s %q, want USAGE %q", tc.flag, tc.in, ce.Code, ce.Message, tc.err)
		}
	}
}

// A TTL the daemon refuses as below lease.minTtlMs is said in the terms of
// the flag typed, with the minimum as a person writes it.
func TestATTLBelowTheMinimumIsSaidInFlagTerms(t *testing.T) {
	// As decoded from the daemon's answer: numbers are float64.
	refused := &exitError{code: 2, err: &contract.Error{Code: contract.CodeBadRequest,
		Message: "ttlMs: must be at least lease.minTtlMs (10000), got 5000",
		Details: map[string]any{"field": "ttlMs", "minTtlMs": float64(10_000)}}}
	var ee *exitError
	if !errors.As(inFlagTerms(refused, map[string][2]string{"ttlMs": {"--ttl", "5s"}}), &ee) {
		t.Fatal("not an exit error")
	}
	ce := contract.AsError(ee.err)
	if want := "--ttl 5s is below the 10s minimum (lease.minTtlMs)"; ce.Message != want || ce.Details["flag"] != "--ttl" {
		t.Errorf("%q %v, want %q with flag --ttl", ce.Message, ce.Details, want)
	}
	if got := shortDuration(1500 * time.Millisecond); got != "1.5s" {
		t.Errorf("shortDuration(1.5s) = %q", got)
	}
}

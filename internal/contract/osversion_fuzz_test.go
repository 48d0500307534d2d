package contract

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseOSVersion feeds the version and range parser anything. It never
// panics; a refusal is BAD_REQUEST naming osVersion; a spec it takes parses
// the same again from its Raw, a single version serves itself, and a range
// is never empty: its lowest version satisfies every bound.
func FuzzParseOSVersion(f *testing.F) {
	for _, seed := range []string{
		"", "18", "26.1", "18.6.1", ">=18 <26", ">18", "<=17.5", "=18", "18 - 26", " 18 ", ">=26 <18", "^18", "~18",
		"18.x", "*", "18 || 26", ">=", ">=a", "<0", "- -", "18 - ", ">=9223372036854775807", "18..1", "+18", "-1", ">=18 <18.0.1",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		spec, err := ParseOSVersion(raw)
		if err != nil {
			cerr, ok := err.(*Error)
			if !ok || cerr.Code != CodeBadRequest || cerr.Details["field"] != "osVersion" {
				t.Fatalf("%q refused with %v, want BAD_REQUEST naming osVersion", raw, err)
			}
			return
		}
		again, err := ParseOSVersion(spec.Raw)
		if err != nil || again.Raw != spec.Raw || len(again.bound) != len(spec.bound) {
			t.Fatalf("%q: its Raw %q parses as %+v %v, not as %+v", raw, spec.Raw, again, err, spec)
		}
		if !spec.IsRange() {
			if spec.Raw != "" && !spec.Matches(spec.Raw) {
				t.Fatalf("%q: version %q does not serve itself", raw, spec.Raw)
			}
			return
		}
		var lo []int
		for _, b := range spec.bound {
			if b.op == ">=" && (lo == nil || compare(b.v, lo) > 0) {
				lo = b.v
			}
		}
		if lo == nil {
			lo = []int{0}
		}
		if overflowed(lo) {
			return // a bound past the largest int: no real version is near it
		}
		parts := make([]string, len(lo))
		for i, n := range lo {
			parts[i] = strconv.Itoa(n)
		}
		if v := strings.Join(parts, "."); !spec.Matches(v) {
			t.Fatalf("%q was taken as a range, but its lowest version %s does not match it", raw, v)
		}
	})
}

func overflowed(v []int) bool {
	for _, n := range v {
		if n < 0 {
			return true
		}
	}
	return false
}

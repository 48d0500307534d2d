package contract

import (
	"regexp"
	"strconv"
	"strings"
)

// oneVersion is the shape of one version as a runtime is named: a number
// (18, 26.1), an Android level with its extension (34-ext12), or an Android
// preview's code name, which starts with a capital (Baklava). Anything else
// ("garbage") is malformed, refused before a request is made, rather than a
// runtime looked for and not found.
var oneVersion = regexp.MustCompile(`^(\d+(\.\d+)*(-[A-Za-z0-9]+)?|[A-Z][A-Za-z0-9]*)$`)

// numericVersion is a version with no letters, the only kind iOS has.
var numericVersion = regexp.MustCompile(`^\d+(\.\d+)*$`)

// OSVersionSpec is what a request's osVersion asks for: one version (a
// short one such as "18" covers 18.x) or a range ("&gt;=18 &lt;26",
// "18 - 26"). Anything with letters ("Baklava", "34-ext12") is one exact
// version.
type OSVersionSpec struct {
	Raw   string
	bound []bound // empty: Raw is one version
}

type bound struct {
	op string // ">=" or "<"
	v  []int
}

// CheckFor refuses a version the platform cannot have: iOS versions are
// numbers only.
func (s OSVersionSpec) CheckFor(p Platform) error {
	if p == PlatformIOS && !s.IsRange() && s.Raw != "" && !numericVersion.MatchString(s.Raw) {
		return BadRequest("osVersion", "iOS versions are numbers, such as 26.1 or 18; got %q", clip(s.Raw))
	}
	return nil
}

// IsRange reports whether the spec is a range; a range never downloads.
func (s OSVersionSpec) IsRange() bool { return len(s.bound) > 0 }

// ParseOSVersion reads an osVersion; "" is "any". Semver operators that do
// not fit OS versions (^ ~ .x * ||) are refused.
func ParseOSVersion(raw string) (OSVersionSpec, error) {
	s := strings.TrimSpace(raw)
	spec := OSVersionSpec{Raw: s}
	if s == "" {
		return spec, nil
	}
	for _, bad := range []string{"^", "~", ".x", "*", "||"} {
		if strings.Contains(s, bad) {
			return spec, BadRequest("osVersion", "%q is not supported; give a version (26.1, 18), a range (>=18 <26) or a hyphen range (18 - 26)", bad)
		}
	}
	if lo, hi, ok := strings.Cut(s, " - "); ok {
		a, okA := parseVersion(strings.TrimSpace(lo))
		b, okB := parseVersion(strings.TrimSpace(hi))
		if !okA || !okB {
			return spec, BadRequest("osVersion", "a hyphen range takes two numeric versions, got %q", clip(s))
		}
		spec.bound = []bound{{">=", a}, {"<", next(b)}}
		return spec, spec.check()
	}
	if !strings.ContainsAny(s, "<>=") {
		if !oneVersion.MatchString(s) {
			return spec, BadRequest("osVersion", "%q is not a version: give a version (26.1, 18), a range (>=18 <26), a hyphen range (18 - 26) or an Android preview's code name (Baklava)", clip(s))
		}
		return spec, nil // one version
	}
	for _, part := range strings.Fields(s) {
		op := strings.TrimRight(part[:min(len(part), 2)], "0123456789.")
		v, ok := parseVersion(strings.TrimPrefix(part, op))
		if !ok {
			return spec, BadRequest("osVersion", "%q is not a comparison such as >=18 or <26", clip(part))
		}
		switch op {
		case ">=":
			spec.bound = append(spec.bound, bound{">=", v})
		case ">":
			spec.bound = append(spec.bound, bound{">=", next(v)})
		case "<":
			spec.bound = append(spec.bound, bound{"<", v})
		case "<=":
			spec.bound = append(spec.bound, bound{"<", next(v)})
		case "=":
			spec.bound = append(spec.bound, bound{">=", v}, bound{"<", next(v)})
		default:
			return spec, BadRequest("osVersion", "%q is not a comparison such as >=18 or <26", clip(part))
		}
	}
	return spec, spec.check()
}

// check refuses a range nothing can satisfy.
func (s OSVersionSpec) check() error {
	var lo, hi []int
	for _, b := range s.bound {
		if b.op == ">=" && (lo == nil || compare(b.v, lo) > 0) {
			lo = b.v
		}
		if b.op == "<" && (hi == nil || compare(b.v, hi) < 0) {
			hi = b.v
		}
	}
	if lo == nil {
		lo = []int{0} // no version is below 0: "<0" is as empty as ">=18 <18"
	}
	if hi != nil && compare(lo, hi) >= 0 {
		return BadRequest("osVersion", "the range %q is empty", clip(s.Raw))
	}
	return nil
}

// Matches reports whether an installed version serves the spec.
func (s OSVersionSpec) Matches(have string) bool {
	if s.Raw == "" {
		return true
	}
	if !s.IsRange() {
		return have == s.Raw || strings.HasPrefix(have, s.Raw+".")
	}
	v, ok := parseVersion(have)
	if !ok {
		return false
	}
	for _, b := range s.bound {
		c := compare(v, b.v)
		if (b.op == ">=" && c < 0) || (b.op == "<" && c >= 0) {
			return false
		}
	}
	return true
}

func parseVersion(s string) ([]int, bool) {
	if s == "" {
		return nil, false
	}
	parts := strings.Split(s, ".")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// next is the smallest version above every version v covers: 18 → 19,
// 18.4 → 18.5.
func next(v []int) []int {
	out := append([]int(nil), v...)
	out[len(out)-1]++
	return out
}

// compare orders dotted versions; missing components are zero.
func compare(a, b []int) int {
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// CompareVersions orders two version strings numerically where both are
// numeric, else as text.
func CompareVersions(a, b string) int {
	va, okA := parseVersion(a)
	vb, okB := parseVersion(b)
	if okA && okB {
		return compare(va, vb)
	}
	return strings.Compare(a, b)
}

package ids

import (
	"regexp"
	"testing"
)

func TestNewIsThePrefixAndNRandomBytesInHex(t *testing.T) {
	for _, c := range []struct {
		prefix string
		n      int
		want   *regexp.Regexp
	}{
		{"lse_", Short, regexp.MustCompile(`^lse_[0-9a-f]{16}$`)},
		{"tr_", Long, regexp.MustCompile(`^tr_[0-9a-f]{32}$`)},
		{"", Short, regexp.MustCompile(`^[0-9a-f]{16}$`)},
	} {
		a, b := New(c.prefix, c.n), New(c.prefix, c.n)
		if !c.want.MatchString(a) || !c.want.MatchString(b) {
			t.Errorf("New(%q, %d) = %q, %q; want %s", c.prefix, c.n, a, b, c.want)
		}
		if a == b {
			t.Errorf("New(%q, %d) gave %q twice", c.prefix, c.n, a)
		}
	}
}

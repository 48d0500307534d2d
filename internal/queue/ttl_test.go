package queue

import (
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// TTLFor is the one check of a TTL every surface reaches: 0 is the default;
// below the minimum or above the maximum is BAD_REQUEST naming the field
// and the bound it broke, never raised or clamped.
func TestTTLForBoundsATTLBothWays(t *testing.T) {
	const def, lo, hi = 15 * time.Minute, 10 * time.Second, 4 * time.Hour
	for _, c := range []struct {
		ms    int64
		want  time.Duration
		bound string
	}{
		{0, def, ""},
		{10_000, 10 * time.Second, ""},
		{4 * 3600_000, hi, ""},
		{5, 0, "minTtlMs"},
		{9_999, 0, "minTtlMs"},
		{4*3600_000 + 1, 0, "maxTtlMs"},
	} {
		got, err := TTLFor(c.ms, def, lo, hi, "ttlMs")
		if c.bound == "" {
			if err != nil || got != c.want {
				t.Errorf("TTLFor(%d) = %v, %v; want %v", c.ms, got, err, c.want)
			}
			continue
		}
		if err == nil || err.Code != contract.CodeBadRequest || err.Details["field"] != "ttlMs" || err.Details[c.bound] == nil {
			t.Errorf("TTLFor(%d) = %v, %v; want BAD_REQUEST naming ttlMs with %s", c.ms, got, err, c.bound)
		}
	}
	if got, err := TTLFor(5, def, 0, hi, "ttlMs"); err != nil || got != 5*time.Millisecond {
		t.Errorf("with no minimum TTLFor(5) = %v, %v; want 5ms", got, err)
	}
}

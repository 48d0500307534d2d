package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

func TestParseLeaseCounts(t *testing.T) {
	got, err := parseLeaseCounts(" 10000, 10,10 ")
	if err != nil || !slices.Equal(got, []int{10, 10000}) {
		t.Errorf("parseLeaseCounts = %v, %v; want [10 10000]", got, err)
	}
	for _, bad := range []string{"", ",", "0", "-3", "ten", "100001"} {
		if _, err := parseLeaseCounts(bad); err == nil {
			t.Errorf("parseLeaseCounts(%q) accepted it", bad)
		}
	}
}

func TestSoakFlagsOutOfRangeAreUsageErrors(t *testing.T) {
	for _, c := range []struct {
		soak, every string
		agents      int
	}{
		{"", "10s", 50}, {"abc", "10s", 50}, {"500ms", "100ms", 50}, {"25h", "10s", 50},
		{"1m", "50ms", 50}, {"1m", "-1s", 50}, {"30s", "10s", 50}, {"1m", "10s", 0}, {"1m", "10s", 1001},
	} {
		_, err := soakPlanOf(c.soak, c.every, c.agents, false)
		var xe *exitError
		if !errors.As(err, &xe) || xe.code != 2 || !strings.HasPrefix(xe.Error(), string(contract.CodeUsage)) {
			t.Errorf("--soak %q --sample-every %q --agents %d: %v, want a USAGE error (exit 2)", c.soak, c.every, c.agents, err)
		}
	}
	p, err := soakPlanOf("10m", "10s", 50, false)
	if err != nil || p.Duration != 10*time.Minute || p.Every != 10*time.Second || p.Agents != 50 {
		t.Fatalf("the documented soak: %+v, %v", p, err)
	}
}

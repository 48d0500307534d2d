package wallclock

import (
	"math"
	"path/filepath"
	"testing"
	"time"
)

func TestSkew(t *testing.T) {
	const hour = int64(time.Hour / time.Millisecond)
	base := Reading{WallMs: 1_800_000_000_000, BootNs: int64(100 * time.Second), BootID: "b1"}
	at := func(wallMs int64, boot time.Duration, id string) Reading {
		return Reading{WallMs: base.WallMs + wallMs, BootNs: base.BootNs + int64(boot), BootID: id}
	}
	for _, c := range []struct {
		name   string
		now    Reading
		skew   time.Duration
		ok     bool
		jumped bool
	}{
		{"ten seconds, both clocks", at(10_000, 10*time.Second, "b1"), 0, true, false},
		{"wall forward an hour", at(10_000+hour, 10*time.Second, "b1"), time.Hour, true, true},
		{"wall back an hour", at(10_000-hour, 10*time.Second, "b1"), -time.Hour, true, true},
		{"NTP slew, half a second in a day", at(86_400_500, 24*time.Hour, "b1"), 500 * time.Millisecond, true, false},
		{"a step of exactly the threshold", at(11_000, 10*time.Second, "b1"), time.Second, true, true},
		{"asleep an hour: both clocks count it", at(hour, time.Hour, "b1"), 0, true, false},
		{"wall forward 300 years, past a Duration", at(10_000+300*365*24*hour, 10*time.Second, "b1"), math.MaxInt64, true, true},
		{"wall back 300 years, past a Duration", at(10_000-300*365*24*hour, 10*time.Second, "b1"), math.MinInt64, true, true},
		{"another boot", at(10_000, 10*time.Second, "b2"), 0, false, false},
		{"the boot clock went back", at(10_000, -10*time.Second, "b1"), 0, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			skew, ok := Skew(base, c.now)
			if skew != c.skew || ok != c.ok || (ok && Jumped(skew) != c.jumped) {
				t.Fatalf("Skew = %s, %v (jumped %v); want %s, %v (jumped %v)", skew, ok, Jumped(skew), c.skew, c.ok, c.jumped)
			}
		})
	}
	if _, ok := Skew(Reading{WallMs: 1}, Reading{WallMs: 2}); ok {
		t.Error("readings without a boot id compared")
	}
}

// Two readings a moment apart on this machine compare, without a jump; a
// saved reading loads back.
func TestReadAndSave(t *testing.T) {
	a := Read()
	b := Read()
	if a.BootID == "" {
		t.Skip("no boot clock on this platform")
	}
	if skew, ok := Skew(a, b); !ok || Jumped(skew) {
		t.Fatalf("two readings a moment apart: skew %s, ok %v", skew, ok)
	}
	path := filepath.Join(t.TempDir(), "clock.json")
	if _, found, err := Load(path); found || err != nil {
		t.Fatalf("Load of nothing: %v, %v", found, err)
	}
	if err := Save(path, a); err != nil {
		t.Fatal(err)
	}
	if got, found, err := Load(path); !found || err != nil || got != a {
		t.Fatalf("Load = %+v, %v, %v; want %+v", got, found, err, a)
	}
}

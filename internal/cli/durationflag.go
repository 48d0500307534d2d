package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// durationFlag reads the value of a duration flag that must carry its unit
// (--ttl, --timeout): a bare number is refused, since read as milliseconds
// `--ttl 5` granted a lease that expired before it was printed. zeroOK lets
// a bare 0 through, for a flag where 0 means "no limit". The refusal
// suggests the number in minutes, or in milliseconds for a count of
// thousands (what `5000` was meant as before).
func durationFlag(flag, s string, zeroOK bool) (time.Duration, error) {
	t := strings.TrimSpace(s)
	bare := t != "" && strings.Trim(t, "0123456789.") == ""
	if f, err := strconv.ParseFloat(t, 64); bare && err == nil {
		if f == 0 && zeroOK {
			return 0, nil
		}
		if f == 0 {
			return 0, usage("%s must be more than 0: a number with ms, s, m, h or d, such as 15m", flag)
		}
		unit := "m"
		if f >= 1000 {
			unit = "ms"
		}
		return 0, usage("%s %s has no unit; did you mean %s%s? (a number with ms, s, m, h or d)", flag, t, t, unit)
	}
	d, err := parseDuration(t)
	if err != nil {
		return 0, usage("%s: %v", flag, err)
	}
	return d, nil
}

// parseDuration reads a duration with unit ms, s, m, h or d; a bare number
// is milliseconds.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	num, unit := s, time.Millisecond
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, unit = strings.TrimSuffix(s, u.suffix), u.unit
			break
		}
	}
	if num == "" || strings.Trim(num, "0123456789.") != "" { // no sign, exponent, inf or nan
		return 0, fmt.Errorf("%q is not a duration (use a number with ms, s, m, h or d)", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%q is not a duration (use a number with ms, s, m, h or d)", s)
	}
	d := f * float64(unit)
	if d > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too long", s)
	}
	return time.Duration(d), nil
}

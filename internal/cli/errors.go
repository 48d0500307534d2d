package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// printError writes the one stderr line of a failure: a sentence for a
// person at a terminal, else {"error":{...}} for a program. Both carry the
// next step when simlock knows one.
func printError(w io.Writer, err error, human bool) {
	ce := contract.AsError(err)
	next := nextStep(ce)
	if human {
		fmt.Fprintln(w, errorHuman(ce, next))
		return
	}
	if next != "" {
		if _, ok := ce.Details["next"]; !ok {
			ce = ce.With("next", next)
		}
	}
	_ = printJSON(w, map[string]any{"error": ce})
}

// errorHuman is a failure as one line: what happened, its code, and what to
// do next.
func errorHuman(ce *contract.Error, next string) string {
	msg := strings.Join(strings.Fields(ce.Message), " ") // one line, whatever the message holds
	line := "✗ " + strings.TrimSuffix(msg, ".") + " [" + string(ce.Code) + "]"
	if next != "" {
		line += ". Next: " + next
	}
	return line
}

// nextStep is what a person can do about a failure, in simlock commands,
// or "" when the message already says it or there is nothing to do.
func nextStep(ce *contract.Error) string {
	str := func(key string) string {
		switch v := ce.Details[key].(type) {
		case string:
			return v
		case contract.Platform: // as made in this process, not decoded
			return string(v)
		}
		return ""
	}
	switch ce.Code {
	case contract.CodeNoCapacity:
		if m, _ := ce.Details["maintenance"].(bool); m {
			return "try again once the nuke has finished (simlock status shows it)"
		}
		return "simlock status shows who holds the devices and until when; without --no-wait the request waits in line"
	case contract.CodeQueueTimeout:
		return "simlock status shows who holds the devices and until when; a longer --timeout waits more"
	case contract.CodeUnknownModel:
		if p := str("platform"); p != "" {
			return "simlock catalog --platform " + p + " lists the models and classes"
		}
		return "simlock catalog lists the models and classes"
	case contract.CodeRuntimeMissing:
		if d, _ := ce.Details["downloadable"].(bool); d {
			component := str("component")
			if component == "" {
				component = str("osVersion")
			}
			return "add --allow-download to download it while you wait, or simlock component install " + str("platform") + " " + component + " first"
		}
		if offered := strList(ce.Details["offered"]); len(offered) > 0 {
			// Refused as not downloadable: name what is, runnable as it is.
			return "simlock component install " + str("platform") + " " + offered[0] + " installs one the driver offers (" + strings.Join(offered, ", ") + ")"
		}
		if p := str("platform"); p != "" {
			return "simlock catalog --platform " + p + " shows the installed and downloadable runtimes"
		}
		return "simlock catalog shows the installed runtimes"
	case contract.CodeRequesterAlreadyLeased:
		if id := str("existingLeaseId"); id != "" {
			return "simlock release " + id + " ends it, or give another --agent-id"
		}
		return "wait for that request to be served, or give another --agent-id"
	case contract.CodeUnknownLease:
		return "simlock list --leases shows the active leases"
	case contract.CodeUnknownDevice:
		return "simlock list --devices shows the devices"
	case contract.CodeDaemonConnectionLost, contract.CodeDaemonStartupFailed:
		return "simlock daemon logs shows why"
	}
	return ""
}

// strList reads a list of strings from an error's details, as made here
// ([]string) or as decoded from the daemon's answer ([]any).
func strList(v any) []string {
	switch l := v.(type) {
	case []string:
		return l
	case []any:
		var out []string
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// inFlagTerms restates a BAD_REQUEST about an input field in the terms of
// the flag the user typed: given maps a field (ttlMs) to its flag and the
// value as typed ("--ttl", "5h"). "ttlMs: must be at most lease.maxTtlMs
// (14400000), got 18000000" becomes "--ttl 5h is above the 4h maximum
// (lease.maxTtlMs)". Any other error is returned as it is.
func inFlagTerms(err error, given map[string][2]string) error {
	var ee *exitError
	if !errors.As(err, &ee) {
		return err
	}
	var ce *contract.Error
	if !errors.As(ee.err, &ce) {
		return err
	}
	field, _ := ce.Details["field"].(string)
	flag, ok := given[field]
	if !ok {
		return err
	}
	if _, said := ce.Details["flag"]; said {
		return err // already in a flag's terms
	}
	restated := *ce
	restated.Details = map[string]any{"flag": flag[0]}
	for k, v := range ce.Details {
		restated.Details[k] = v
	}
	typed := flag[1]
	if r := []rune(typed); len(r) > maxEchoed {
		typed = string(r[:maxEchoed-1]) + "…" // an oversized value is what was refused: no need to print it whole
	}
	if limit, ok := msDetail(ce.Details, "maxTtlMs"); ok && field == "ttlMs" {
		restated.Message = fmt.Sprintf("%s %s is above the %s maximum (lease.maxTtlMs)", flag[0], typed, shortDuration(limit))
	} else if limit, ok := msDetail(ce.Details, "minTtlMs"); ok && field == "ttlMs" {
		restated.Message = fmt.Sprintf("%s %s is below the %s minimum (lease.minTtlMs)", flag[0], typed, shortDuration(limit))
	} else if typed == "" {
		// Not given: "platform: is required" is "--platform is required".
		restated.Message = flag[0] + " " + strings.TrimPrefix(ce.Message, field+": ")
	} else {
		restated.Message = flag[0] + " " + typed + ": " + strings.TrimPrefix(ce.Message, field+": ")
	}
	return &exitError{code: ee.code, err: &restated, quiet: ee.quiet}
}

// maxEchoed is the most of a refused value an error line repeats.
const maxEchoed = 64

// msDetail reads a millisecond count from an error's details, which hold it
// as a Go integer when the error was made here and as a float64 when it was
// decoded from the daemon's answer.
func msDetail(d map[string]any, key string) (time.Duration, bool) {
	switch v := d[key].(type) {
	case int64:
		return time.Duration(v) * time.Millisecond, true
	case int:
		return time.Duration(v) * time.Millisecond, true
	case float64:
		return time.Duration(v) * time.Millisecond, true
	}
	return 0, false
}

// shortDuration writes d as a person would: 4h, 90m, 1h30m, 45s.
func shortDuration(d time.Duration) string {
	if d%time.Second != 0 {
		return d.String() // 1.5s, 250ms: rounding would misstate a bound
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

package cli

import (
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// riskNote is a change in a held lease's renewals, passed from the
// renewals to the holder's loop, which alone writes to stderr.
type riskNote struct {
	change  client.RiskChange
	line    string // the at-risk sentence (client.Risk.AtRiskLine)
	since   time.Time
	expires time.Time
	err     error // the renewal that failed, for RiskAtRisk
}

// sayRisk tells the holder's user that its lease is at risk (renewals
// fail; it ends at its deadline unless one succeeds) or safe again.
func sayRisk(say func(string, map[string]any), leaseID string, n riskNote) {
	expires := n.expires.UTC().Format(time.RFC3339)
	if n.change == client.RiskSafe {
		msg := "lease safe again: lease " + leaseID + " renewed, expires at " + expires
		say("✓ "+msg, map[string]any{"notice": "lease-safe", "leaseId": leaseID,
			"ttlDeadline": n.expires.UnixMilli(), "message": msg})
		return
	}
	ce := contract.AsError(n.err)
	msg := n.line + " (lease " + leaseID + ": " + ce.Error() + "); still renewing"
	say("! "+msg, map[string]any{"notice": "lease-at-risk", "leaseId": leaseID,
		"since": n.since.UnixMilli(), "ttlDeadline": n.expires.UnixMilli(), "code": ce.Code, "message": msg})
}

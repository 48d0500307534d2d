package client

import (
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Risk follows a held lease's renewals, as Hold reports them, and says
// when the lease comes to be at risk (a renewal failed after the last one
// that succeeded) and when it is safe again (a renewal succeeded after
// failures). A holder tells its user at each change, once, and keeps
// renewing: the lease lives until its deadline whatever the renewals do.
//
// A Risk is not safe for concurrent use; Hold calls report from one
// goroutine.
type Risk struct {
	deadline int64     // the lease's last known end, epoch ms
	since    time.Time // when renewals began failing; zero while safe
}

// NewRisk follows lease, held and safe as granted.
func NewRisk(lease contract.LeaseRecord) *Risk { return &Risk{deadline: lease.TTLDeadline} }

// RiskChange is what a renewal changed about a held lease.
type RiskChange int

// The changes a renewal can make.
const (
	// RiskNone: no change to tell (a success while safe, a failure while
	// already at risk).
	RiskNone RiskChange = iota
	// RiskAtRisk: the first renewal that failed since the last success.
	RiskAtRisk
	// RiskSafe: a renewal succeeded after failures.
	RiskSafe
)

// Note records one renewal's outcome at now (rec when err is nil) and
// returns what it changed.
func (r *Risk) Note(now time.Time, rec contract.LeaseRecord, err error) RiskChange {
	if err == nil {
		r.deadline = rec.TTLDeadline
		if r.since.IsZero() {
			return RiskNone
		}
		r.since = time.Time{}
		return RiskSafe
	}
	if !r.since.IsZero() {
		return RiskNone
	}
	r.since = now
	return RiskAtRisk
}

// Since is when renewals began failing (zero while the lease is safe).
func (r *Risk) Since() time.Time { return r.since }

// ExpiresAt is when the lease ends unless a renewal succeeds first: the
// deadline of the last renewal that did.
func (r *Risk) ExpiresAt() time.Time { return time.UnixMilli(r.deadline) }

// AtRiskLine is the sentence a holder tells of a lease at risk: since when
// renewals fail and when the lease ends unless one succeeds. Times are
// UTC, to the second.
func (r *Risk) AtRiskLine() string {
	return "lease at risk: renewals failing since " + r.since.UTC().Format(time.RFC3339) +
		", expires at " + r.ExpiresAt().UTC().Format(time.RFC3339)
}

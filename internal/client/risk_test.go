package client

import (
	"errors"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

func TestRiskTellsEachChangeOnce(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fail := contract.Errorf(contract.CodeWorkerUnreachable, "worker w did not answer")
	renewed := func(deadline time.Time) contract.LeaseRecord {
		return contract.LeaseRecord{TTLDeadline: deadline.UnixMilli()}
	}
	type step struct {
		at      time.Duration
		rec     contract.LeaseRecord
		err     error
		want    RiskChange
		since   time.Duration // -1: safe
		expires time.Time
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"renewals that succeed tell nothing", []step{
			{10 * time.Second, renewed(t0.Add(40 * time.Second)), nil, RiskNone, -1, t0.Add(40 * time.Second)},
			{20 * time.Second, renewed(t0.Add(50 * time.Second)), nil, RiskNone, -1, t0.Add(50 * time.Second)},
		}},
		{"the first failure is at risk, the next ones tell nothing, the deadline stays the last success's", []step{
			{10 * time.Second, renewed(t0.Add(40 * time.Second)), nil, RiskNone, -1, t0.Add(40 * time.Second)},
			{20 * time.Second, contract.LeaseRecord{}, fail, RiskAtRisk, 20 * time.Second, t0.Add(40 * time.Second)},
			{30 * time.Second, contract.LeaseRecord{}, errors.New("timeout"), RiskNone, 20 * time.Second, t0.Add(40 * time.Second)},
		}},
		{"a success after failures is safe again, and a later failure at risk again", []step{
			{10 * time.Second, contract.LeaseRecord{}, fail, RiskAtRisk, 10 * time.Second, t0.Add(30 * time.Second)},
			{20 * time.Second, renewed(t0.Add(50 * time.Second)), nil, RiskSafe, -1, t0.Add(50 * time.Second)},
			{30 * time.Second, contract.LeaseRecord{}, fail, RiskAtRisk, 30 * time.Second, t0.Add(50 * time.Second)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRisk(contract.LeaseRecord{TTLDeadline: t0.Add(30 * time.Second).UnixMilli()})
			for i, s := range tt.steps {
				if got := r.Note(t0.Add(s.at), s.rec, s.err); got != s.want {
					t.Errorf("step %d: change = %v, want %v", i, got, s.want)
				}
				wantSince := time.Time{}
				if s.since >= 0 {
					wantSince = t0.Add(s.since)
				}
				if !r.Since().Equal(wantSince) {
					t.Errorf("step %d: since = %v, want %v", i, r.Since(), wantSince)
				}
				if !r.ExpiresAt().Equal(s.expires) {
					t.Errorf("step %d: expires at %v, want %v", i, r.ExpiresAt(), s.expires)
				}
			}
		})
	}
}

func TestRiskLineNamesSinceAndExpiry(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := NewRisk(contract.LeaseRecord{TTLDeadline: t0.Add(30 * time.Second).UnixMilli()})
	r.Note(t0.Add(10*time.Second), contract.LeaseRecord{}, errors.New("down"))
	want := "lease at risk: renewals failing since 2026-01-02T03:04:15Z, expires at 2026-01-02T03:04:35Z"
	if got := r.AtRiskLine(); got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
}

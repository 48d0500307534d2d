package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
	"github.com/simlock/simlock/internal/store"
)

func TestTheEventLogIsPrunedToEventLogMaxEventsAndStatusSaysSo(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"eventLog":{"maxEvents":5,"retentionDays":30}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, home := startDaemon(t, cfg)
	ctx := context.Background()
	a := dial(t, home, "a", false)
	// Renewals: events that end with the call, so the log is still while
	// the test reads it.
	g, err := a.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := a.Renew(ctx, g.Lease.ID, 0); err != nil {
			t.Fatal(err)
		}
	}
	before, err := d.db.EventLogSpan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.Events <= 5 {
		t.Fatalf("only %d events after a lease and ten renewals; the test needs more than 5", before.Events)
	}
	if err := d.pruneHistory(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	kept, err := d.db.Events(ctx, store.EventQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 5 || kept[4].Seq != before.LastSeq {
		t.Fatalf("kept %d events ending at seq %d, want the newest 5 ending at %d", len(kept), kept[len(kept)-1].Seq, before.LastSeq)
	}
	s, err := a.StatusWith(ctx, contract.StatusGetInput{Summary: true})
	if err != nil {
		t.Fatal(err)
	}
	l := s.EventLog
	if l == nil {
		t.Fatal("status has no eventLog")
	}
	if l.Events != 5 || l.OldestSeq != kept[0].Seq || l.LastSeq != before.LastSeq || l.MaxEvents != 5 || l.RetentionDays != 30 {
		t.Errorf("eventLog = %+v, want 5 events from seq %d to %d, maxEvents 5, retentionDays 30", *l, kept[0].Seq, before.LastSeq)
	}
	if l.LastPruneAt == 0 || l.PrunedTotal < before.Events-5 {
		t.Errorf("eventLog = %+v, want a prune that deleted at least %d", *l, before.Events-5)
	}
}

// versioned is a demo driver that reports one tool.
type versioned struct{ driver.Driver }

func (versioned) ToolVersions(context.Context) ([]driver.ToolVersion, error) {
	return []driver.ToolVersion{{Name: "xcode", Version: "26.1", Build: "17B55"}}, nil
}

func TestStatusShowsTheHostOSAndTheToolVersionsTheDriversReport(t *testing.T) {
	drivers := map[contract.Platform]driver.Driver{}
	for _, p := range contract.Platforms() {
		dd, err := demo.New(demo.Options{Platform: p})
		if err != nil {
			t.Fatal(err)
		}
		drivers[p] = dd
	}
	drivers[contract.PlatformIOS] = versioned{drivers[contract.PlatformIOS]}
	d, home := startDaemonOpts(t, Options{Drivers: drivers, HostOS: "macOS 15.5"})
	c := dial(t, home, "a", false)
	if _, err := c.StatusWith(context.Background(), contract.StatusGetInput{WaitReady: true}); err != nil {
		t.Fatal(err)
	}
	// What the daemon runs in the background after ready, run here to
	// know it is done.
	d.readToolVersions()
	s, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Drivers) != len(contract.Platforms()) {
		t.Fatalf("drivers = %+v, want one per platform", s.Drivers)
	}
	if s.Host.OSVersion != "macOS 15.5" {
		t.Errorf("host.osVersion = %q, want macOS 15.5", s.Host.OSVersion)
	}
	for _, ds := range s.Drivers {
		var want []contract.ToolVersion
		if ds.Platform == contract.PlatformIOS {
			want = []contract.ToolVersion{{Name: "xcode", Version: "26.1", Build: "17B55"}}
		}
		if len(ds.Tools) != len(want) || (len(want) > 0 && ds.Tools[0] != want[0]) {
			t.Errorf("%s tools = %+v, want %+v", ds.Platform, ds.Tools, want)
		}
	}
}

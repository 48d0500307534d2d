package daemon

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/wire"
)

func TestAResultFrameIsWhatEncodingTheResponseWouldWrite(t *testing.T) {
	for _, c := range []struct{ id, result string }{
		{`"c1"`, `{"a":1,"b":[true,null,"x\"y"]}`},
		{`17`, `null`},
		{`"a\u00e9"`, `"\u003chtml\u003e"`},
	} {
		want, err := wire.Encode(contract.Response{ID: json.RawMessage(c.id), Result: json.RawMessage(c.result)})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := resultFrame(json.RawMessage(c.id), json.RawMessage(c.result)); err != nil || string(got) != string(want) {
			t.Errorf("id %s result %s:\n got %s\nwant %s", c.id, c.result, got, want)
		}
	}
}

func TestAFullStatusOverTheSocketIsWhatTheEngineHolds(t *testing.T) {
	d, home := startDaemon(t, nil)
	c := dial(t, home, "op", true)
	ctx := context.Background()
	for _, p := range []contract.Platform{contract.PlatformIOS, contract.PlatformAndroid} {
		if _, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: p, RequesterID: "r-" + string(p)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var raw json.RawMessage
	if err := c.Call(ctx, contract.OpStatusGet, contract.StatusGetInput{}, &raw); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(raw) {
		t.Fatalf("status is not JSON: %s", raw)
	}
	var got contract.Status
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := d.engine.Snapshot(false)
	if !reflect.DeepEqual(got.Devices, want.Devices) || !reflect.DeepEqual(got.Leases, want.Leases) || len(got.Leases) != 2 {
		t.Fatalf("status lists\n%+v\n%+v\nwant\n%+v\n%+v", got.Devices, got.Leases, want.Devices, want.Leases)
	}
	if got.Counts == nil || got.Counts.Leases != 2 || got.Capacity == nil || got.Daemon.Health != "running" || len(got.Drivers) != 2 {
		t.Fatalf("the rest of the status: %s", raw)
	}
}

func TestAnAgentsStatusCountsOtherAgentsLeasesWithoutListingThem(t *testing.T) {
	_, home := startDaemon(t, nil)
	ctx := context.Background()
	alice, bob := dial(t, home, "alice", false), dial(t, home, "bob", false)
	mine, err := alice.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := bob.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var raw json.RawMessage
	if err := alice.Call(ctx, contract.OpStatusGet, contract.StatusGetInput{}, &raw); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), theirs.Lease.ID) || strings.Contains(string(raw), `"bob"`) {
		t.Fatalf("alice's status names bob's lease: %s", raw)
	}
	var got contract.Status
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Leases) != 1 || got.Leases[0].ID != mine.Lease.ID || got.Counts == nil || got.Counts.Leases != 2 {
		t.Fatalf("alice's status: leases %+v, counts %+v; want her lease listed and both counted", got.Leases, got.Counts)
	}
}

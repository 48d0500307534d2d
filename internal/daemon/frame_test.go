package daemon

import (
	"context"
	"encoding/json"
	"reflect"
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
	c := dial(t, home, "agent", false)
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

package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
)

// Two owners may each choose the lease id build-42, over the socket and
// over HTTP, and each reaches its own lease by it on every operation: the
// lease view, passthrough, the news of its end (another owner's lease of
// the same id ending is not news to it), HTTP reads and releases. A third
// caller learns of neither.
func TestTwoOwnersEachHaveTheirOwnChosenLeaseID(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"http":{"enabled":true,"port":0},"capacity":{"strategy":"fixed","config":{"maxRunning":4}}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, home := startDaemon(t, cfg)
	ctx := context.Background()
	alice, bob := dial(t, home, "alice", false), dial(t, home, "bob", false)
	ga, err := alice.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, LeaseID: "build-42"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := bob.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid, LeaseID: "build-42"}, nil)
	if err != nil {
		t.Fatalf("bob choosing build-42, which alice chose: %v, want his own", err)
	}
	if ga.Lease.ID != "build-42" || gb.Lease.ID != "build-42" || ga.Lease.Key == gb.Lease.Key {
		t.Fatalf("grants %+v and %+v, want both build-42 under keys of their own", ga.Lease, gb.Lease)
	}
	for _, c := range []struct {
		name string
		cl   interface {
			Call(context.Context, contract.Op, any, any) error
		}
		want contract.LeaseGrant
	}{{"alice", alice, ga}, {"bob", bob, gb}} {
		var got contract.LeaseGetResult
		if err := c.cl.Call(ctx, contract.OpLeaseGet, contract.LeaseIDInput{LeaseID: "build-42"}, &got); err != nil || got.Device.ID != c.want.Device.ID {
			t.Errorf("%s's lease.get build-42: %+v, %v; want its own device %s", c.name, got.Device, err, c.want.Device.ID)
		}
	}
	// adb on build-42 is refused for alice, whose build-42 is an iOS
	// device, and reaches the driver for bob, whose is Android (the demo
	// driver then refuses it for its own reason).
	var pt contract.PassthroughResult
	err = bob.Call(ctx, contract.OpPassthrough, contract.PassthroughInput{Tool: "adb", Args: []string{"devices"}, LeaseID: "build-42"}, &pt)
	if err != nil && strings.Contains(err.Error(), "ios device") {
		t.Errorf("bob's adb passthrough on his build-42 (an Android device): %v, which is alice's", err)
	}
	err = alice.Call(ctx, contract.OpPassthrough, contract.PassthroughInput{Tool: "adb", Args: []string{"devices"}, LeaseID: "build-42"}, &pt)
	if code(err) != contract.CodePassthroughRefused || !strings.Contains(err.Error(), "ios device") {
		t.Errorf("alice's adb passthrough on her build-42 (an iOS device): %v, want PASSTHROUGH_REFUSED for her iOS lease, not bob's", err)
	}
	carol := dial(t, home, "carol", false)
	if err := carol.Call(ctx, contract.OpLeaseRenew, contract.LeaseRenewInput{LeaseID: "build-42"}, &contract.LeaseRecord{}); code(err) != contract.CodeUnknownLease {
		t.Errorf("carol renewing build-42: %v, want UNKNOWN_LEASE", err)
	}
	if err := carol.Call(ctx, contract.OpLeaseRequest, contract.LeaseRequestInput{Platform: contract.PlatformIOS, LeaseID: "build-42", NoWait: true}, &contract.LeaseGrant{}); err != nil {
		t.Errorf("carol choosing build-42 too: %v, want her own", err)
	}

	// An operator ends alice's by its key: alice's session hears it, bob's
	// (holding its own build-42) does not.
	admin := dial(t, home, "ops", true)
	if _, err := admin.Release(ctx, "build-42"); code(err) != contract.CodeBadRequest {
		t.Errorf("an operator releasing build-42, which three owners chose: %v, want BAD_REQUEST naming the keys", err)
	}
	if _, err := admin.Release(ctx, ga.Lease.Key); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-alice.LeaseLost():
		if p.LeaseID != "build-42" {
			t.Errorf("alice was told of %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("alice's session did not hear that her build-42 ended")
	}
	if _, err := bob.StatusWith(ctx, contract.StatusGetInput{Summary: true}); err != nil { // after any push queued for bob
		t.Fatal(err)
	}
	select {
	case p := <-bob.LeaseLost():
		t.Errorf("bob's session was told %+v when alice's build-42 ended", p)
	default:
	}

	// Over HTTP: two agent tokens each choose ci-7.
	var toks [3]contract.TokenCreateResult
	for i := range toks {
		if err := admin.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenAgent}, &toks[i]); err != nil {
			t.Fatal(err)
		}
	}
	do := func(method, path, secret, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, d.HTTPURL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	devices := make([]string, 2)
	for i := range 2 {
		st, m := do("POST", "/v1/lease-requests", toks[i].Secret, `{"platform":"ios","leaseId":"ci-7"}`)
		if st != http.StatusCreated {
			t.Fatalf("token %d choosing ci-7: %d %v", i, st, m)
		}
		id := m["request"].(map[string]any)["id"].(string)
		// A long poll answers at each change of the request (provisioning,
		// booting, ...): poll again until it is granted or ended.
		for polls := 0; st == http.StatusOK || st == http.StatusCreated; polls++ {
			st, m = do("GET", "/v1/lease-requests/"+id+"?wait=30", toks[i].Secret, "")
			if state, _ := m["request"].(map[string]any)["state"].(string); polls == 20 || state == "granted" || state == "failed" || state == "cancelled" {
				break
			}
		}
		lease, _ := m["request"].(map[string]any)["lease"].(map[string]any)
		if st != http.StatusOK || lease == nil || lease["id"] != "ci-7" {
			t.Fatalf("token %d's request: %d %v, want granted as ci-7", i, st, m)
		}
		devices[i], _ = lease["deviceId"].(string)
	}
	for i := range 2 {
		st, m := do("GET", "/v1/leases/ci-7", toks[i].Secret, "")
		lease, _ := m["lease"].(map[string]any)
		if st != http.StatusOK || lease["deviceId"] != devices[i] {
			t.Errorf("token %d's GET /v1/leases/ci-7: %d %v, want its own lease on %s", i, st, m, devices[i])
		}
	}
	if st, m := do("GET", "/v1/leases/ci-7", toks[2].Secret, ""); st != http.StatusNotFound {
		t.Errorf("a third token's GET /v1/leases/ci-7: %d %v, want 404", st, m)
	}
	if st, m := do("DELETE", "/v1/leases/ci-7", toks[0].Secret, ""); st != http.StatusAccepted || m["device"].(map[string]any)["id"] != devices[0] {
		t.Errorf("token 0 releasing ci-7: %d %v, want its own released", st, m)
	}
	if st, m := do("GET", "/v1/leases/ci-7", toks[1].Secret, ""); st != http.StatusOK {
		t.Errorf("token 1's ci-7 after token 0 released its own: %d %v, want it kept", st, m)
	}
	var list contract.LeaseListResult
	if err := admin.Call(ctx, contract.OpLeaseList, contract.Empty{}, &list); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range list.Leases {
		if l.ID == "ci-7" || l.ID == "build-42" {
			keys = append(keys, l.Key)
		}
	}
	if len(keys) != 3 || slices.Contains(keys, "") {
		t.Errorf("an operator's lease list shows keys %v for the chosen ids, want one each", keys)
	}
}

package contract

import (
	"errors"
	"strings"
	"testing"
)

func TestOnlyToolLeasePicksTheCallersOneLeaseOnTheToolsPlatform(t *testing.T) {
	lease := func(id, owner string, p Platform) LeaseGetResult {
		var l LeaseGetResult
		l.Lease.ID, l.Lease.OwnerID, l.Device.Spec.Platform = id, owner, p
		return l
	}
	held := []LeaseGetResult{
		lease("lse_a", "me", PlatformAndroid),
		lease("lse_b", "me", PlatformIOS),
		lease("lse_c", "you", PlatformAndroid),
	}
	got, err := OnlyToolLease("adb", "me", held)
	if err != nil || got == nil || got.Lease.ID != "lse_a" {
		t.Fatalf("adb: got %+v, %v; want lse_a (mine, on Android; lse_c is another owner's)", got, err)
	}
	if got, err := OnlyToolLease("simctl", "you", held); got != nil || err != nil {
		t.Fatalf("simctl for an owner with no iOS lease: got %+v, %v; want none, no error", got, err)
	}
	two := append(held, lease("lse_d", "me", PlatformAndroid))
	_, err = OnlyToolLease("adb", "me", two)
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != CodeBadRequest || !strings.Contains(ce.Message, "lse_a, lse_d") {
		t.Fatalf("two Android leases: got %v; want BAD_REQUEST naming both", err)
	}
}

package contract

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// randomString mixes plain text with every kind of character encoding/json
// escapes: quotes, backslashes, control and HTML characters, U+2028, and
// invalid UTF-8.
func randomString(rng *rand.Rand) string {
	parts := []string{"dev_", "iPhone 17", `"`, `\`, "\n", "\t", "\x01", "\x1f", "<", ">", "&", "\u2028", "\u2029", "é", "日本", "\xff", "\xc3", "emulator-5586", ""}
	s := ""
	for range rng.IntN(6) {
		s += parts[rng.IntN(len(parts))]
	}
	return s
}

func TestTheHandEncodersWriteWhatEncodingJSONWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		d := Device{ID: randomString(rng), DriverDeviceID: randomString(rng), Driver: randomString(rng),
			Spec: DeviceSpec{Platform: Platform(randomString(rng)), Model: randomString(rng), OSVersion: randomString(rng),
				ImageTag: randomString(rng)},
			State: DeviceState(randomString(rng)), Address: randomString(rng), LeaseID: randomString(rng), LeaseKey: randomString(rng),
			CreatedAt: rng.Int64N(1 << 45), StateSince: rng.Int64N(1<<45) - 1<<40, LastUsedAt: rng.Int64N(3),
			TransitionAgeMs: rng.Int64N(3), Stalled: rng.IntN(2) == 0, WorkerID: randomString(rng)}
		want, _ := json.Marshal(d)
		if got := d.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("device:\n got %s\nwant %s", got, want)
		}
		l := LeaseRecord{ID: randomString(rng), Key: randomString(rng), DeviceID: randomString(rng), RequesterID: randomString(rng), OwnerID: randomString(rng),
			GrantedAt: rng.Int64N(1 << 45), TTLMs: rng.Int64N(1 << 30), LastRenewedAt: -rng.Int64N(10), TTLDeadline: rng.Int64N(1 << 45),
			BoundPID: rng.IntN(3), IDChosenByRequester: rng.IntN(2) == 0, WorkerID: randomString(rng), Unreachable: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			l.Worker = &WorkerRef{ID: randomString(rng), Label: randomString(rng)}
		}
		want, _ = json.Marshal(l)
		if got := l.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("lease:\n got %s\nwant %s", got, want)
		}
	}
}

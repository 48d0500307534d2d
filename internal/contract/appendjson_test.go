package contract

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
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
			Spec:  DeviceSpec{Platform: Platform(randomString(rng)), Model: randomString(rng), OSVersion: randomString(rng)},
			State: DeviceState(randomString(rng)), Address: randomString(rng), LeaseID: randomString(rng),
			CreatedAt: rng.Int64N(1 << 45), StateSince: rng.Int64N(1<<45) - 1<<40, LastUsedAt: rng.Int64N(3)}
		want, _ := json.Marshal(d)
		if got := d.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("device:\n got %s\nwant %s", got, want)
		}
		l := LeaseRecord{ID: randomString(rng), DeviceID: randomString(rng), RequesterID: randomString(rng), OwnerID: randomString(rng),
			GrantedAt: rng.Int64N(1 << 45), TTLMs: rng.Int64N(1 << 30), LastRenewedAt: -rng.Int64N(10), TTLDeadline: rng.Int64N(1 << 45)}
		want, _ = json.Marshal(l)
		if got := l.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("lease:\n got %s\nwant %s", got, want)
		}
	}
}

func TestAStatusAppendsToTheSameValueAsJSONMarshal(t *testing.T) {
	s := Status{
		Daemon:     DaemonInfo{Version: "1", Health: "running"},
		Devices:    []Device{{ID: "dev_a", State: DeviceLeased, LeaseID: "lse_a"}, {ID: "dev_b"}},
		Leases:     []LeaseRecord{{ID: "lse_a", DeviceID: "dev_a"}},
		Waiting:    []WaitingRequest{{RequestID: "req_c", Stage: "queued", QueuePosition: 1}},
		QueueDepth: 1,
		Counts:     &StatusCounts{Devices: 2, Leases: 1, Waiting: 1, DevicesByState: map[DeviceState]int{DeviceLeased: 1}},
	}
	for _, v := range []Status{s, {Daemon: s.Daemon}} {
		want, _ := json.Marshal(v)
		got, err := v.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, got)
		}
		_ = json.Unmarshal(want, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	}
}

package usage

import (
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

const minuteMs = int64(contract.UsageMinuteMs)

// Minute rows read by worker, platform and minute gather into one row per
// hour of each worker and platform, each with its minutes' chunks.
func TestGatherMakesOneRowPerHourOfAWorkerAndPlatform(t *testing.T) {
	var g Gather
	h0, h1 := int64(0), int64(HourMs)
	g.Add(h0+minuteMs, "w1", "ios", []byte("a"))
	g.Add(h0+2*minuteMs, "w1", "ios", []byte("b"))
	g.Add(h1+minuteMs, "w1", "ios", []byte("c"))
	g.Add(h0+minuteMs, "w1", "android", []byte("d"))
	g.Add(h0+minuteMs, "w2", "ios", []byte("e"))
	rows := g.Rows()
	want := []struct {
		hour             int64
		worker, platform string
		chunks           []byte
	}{
		{h0, "w1", "ios", AppendChunk(AppendChunk(nil, h0, h0+minuteMs, []byte("a")), h0, h0+2*minuteMs, []byte("b"))},
		{h1, "w1", "ios", AppendChunk(nil, h1, h1+minuteMs, []byte("c"))},
		{h0, "w1", "android", AppendChunk(nil, h0, h0+minuteMs, []byte("d"))},
		{h0, "w2", "ios", AppendChunk(nil, h0, h0+minuteMs, []byte("e"))},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d hour rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		r := rows[i]
		if r.Hour != w.hour || r.Worker != w.worker || r.Platform != w.platform || string(r.Chunks) != string(w.chunks) {
			t.Errorf("row %d = {%d %s %s %q}, want {%d %s %s %q}", i, r.Hour, r.Worker, r.Platform, r.Chunks, w.hour, w.worker, w.platform, w.chunks)
		}
	}
}

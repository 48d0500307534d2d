package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// relay commits batch to the gateway's log and publishes it: the events
// a worker may relay, within the worker's rate (limit), each at the worker's
// time as the gateway takes it (workerTime). The cursor moves to
// lastSeq whatever was dropped: a dropped event is not asked for again.
// It returns why the uplink must end, or "", and whether an event it kept
// changes the worker's status in a way its view could not take from the
// event (foldRelayedLocked), or an event it dropped or refused would have
// changed it (a view kept from events is wrong once one is lost, and only
// a read puts it right; reads are one at a time per worker, so a flood
// costs at most one in flight).
func (f *Fleet) relay(ctx context.Context, w *worker, id string, batch []contract.Event, lastSeq int64) (reason string, refresh bool) {
	kept, refused, dropped, lost := f.limit(w, batch)
	out := make([]contract.Event, 0, len(kept))
	now := time.Now()
	for _, ev := range kept {
		p, err := withWorkerID(ev.Payload, id)
		if err != nil {
			return "sent an invalid event: " + err.Error(), false
		}
		ev.Payload = p
		ev.Timestamp = workerTime(ev.Timestamp, now)
		out = append(out, ev)
	}
	if err := f.opts.Relay(ctx, id, out, lastSeq); err != nil {
		return "could not record its events: " + err.Error(), false
	}
	f.mu.Lock()
	w.lastSeq = lastSeq
	w.view.LastSeenAt = time.Now().UnixMilli()
	refresh = f.foldRelayedLocked(w, out) || lost
	on := f.onEvent
	f.mu.Unlock()
	if refused > 0 {
		f.found(id, findingEventRefused, refused, fmt.Sprintf("%d relayed events of names a worker does not record or with payloads over %d bytes, the last %q: dropped",
			refused, maxRelayedPayload, clip(lastRefused(batch))))
	}
	if dropped > 0 {
		f.found(id, findingEventDropped, dropped, fmt.Sprintf("%d relayed events over %g a second (bursts of %g): dropped", dropped, f.opts.RelayRate, f.opts.RelayBurst))
	}
	if on != nil {
		for _, ev := range kept {
			on(id, ev)
		}
	}
	f.mu.Lock()
	w.toldUpTo(lastSeq)
	f.mu.Unlock()
	return "", refresh
}

// limit keeps, of a batch a worker relays, the events it may relay
// (relayable) within its rate, and counts the others; lost is whether one
// of those names a change of the worker's status (refreshOn).
func (f *Fleet) limit(w *worker, batch []contract.Event) (kept []contract.Event, refused, dropped int64, lost bool) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.relayed == nil {
		w.relayed = newTokenBucket(f.opts.RelayRate, f.opts.RelayBurst, now)
	}
	kept = make([]contract.Event, 0, len(batch))
	for _, ev := range batch {
		switch {
		case !relayable(ev):
			refused++
		case !w.relayed.take(now):
			dropped++
		default:
			kept = append(kept, ev)
			continue
		}
		lost = lost || refreshOn(ev.Event)
	}
	return kept, refused, dropped, lost
}

// lastRefused is the name of the last event of batch a worker may not
// relay.
func lastRefused(batch []contract.Event) string {
	for i := len(batch) - 1; i >= 0; i-- {
		if !relayable(batch[i]) {
			return batch[i].Event
		}
	}
	return ""
}

// withWorkerID sets "workerId" in a payload object; the gateway's value
// wins over any the worker put there. A payload that names no key that
// could read as workerId (no such text, no escape at all) has the key
// added at its end, its bytes otherwise kept; any other is decoded and
// encoded again. Every relayed event passes here, and decoding each
// into a map to add one key was a good part of a relay's cost.
func withWorkerID(payload json.RawMessage, id string) (json.RawMessage, error) {
	if p := bytes.TrimSpace(payload); len(p) > 0 && p[0] == '{' && !bytes.Contains(p, []byte(`"workerId"`)) &&
		bytes.IndexByte(p, '\\') < 0 && json.Valid(p) {
		// A valid document that starts with { is one object, ending in }.
		v, err := json.Marshal(id)
		if err != nil {
			return nil, err
		}
		out := make([]byte, 0, len(p)+len(`,"workerId":`)+len(v))
		out = append(out, p[:len(p)-1]...)
		if len(bytes.TrimSpace(p[1:len(p)-1])) > 0 {
			out = append(out, ',')
		}
		out = append(out, `"workerId":`...)
		out = append(out, v...)
		return append(out, '}'), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil || obj == nil {
		return nil, errors.New("event.payload is not a JSON object")
	}
	obj["workerId"], _ = json.Marshal(id)
	return json.Marshal(obj)
}

func (f *Fleet) emit(event string, payload map[string]any) {
	if f.opts.Emit == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.opts.Emit(ctx, event, payload); err != nil {
		f.log.Warn("could not record a fleet event", "event", event, "err", err)
	}
}

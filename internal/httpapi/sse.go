package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/apiview"
	"github.com/simlock/simlock/internal/contract"
)

// pushBuffer is how many pushes a stream holds for its handler. A stream
// that falls this far behind is ended rather than let it slow the backend.
const pushBuffer = 256

// replayPage is the page size when a resumed event stream replays history.
const replayPage = 1000

// sseWriter writes one response's event stream. Only the handler goroutine
// uses it, which is what serializes the writes.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startSSE sends the stream's headers and the first comment, flushed, so the
// client knows at once that the stream is accepted.
func startSSE(w http.ResponseWriter) (*sseWriter, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	// A stream lasts as long as its client wants; a server-wide write
	// timeout meant for plain requests would cut it.
	_ = rc.SetWriteDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: w, rc: rc}
	return sw, sw.comment("connected")
}

func (sw *sseWriter) comment(text string) error {
	return sw.write([]byte(": " + text + "\n\n"))
}

// event writes one event. JSON data has no raw newlines, so one data line
// carries it.
func (sw *sseWriter) event(name, id string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return sw.write(b.Bytes())
}

func (sw *sseWriter) write(b []byte) error {
	if _, err := sw.w.Write(b); err != nil {
		return err
	}
	if err := sw.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// pushQueue hands a session's pushes to the stream's handler without ever
// blocking the backend: when the buffer is full it gives up and says so.
type pushQueue struct {
	ch       chan contract.Push
	overflow chan struct{}
	once     sync.Once
}

func newPushQueue() *pushQueue {
	return &pushQueue{ch: make(chan contract.Push, pushBuffer), overflow: make(chan struct{})}
}

func (q *pushQueue) push(p contract.Push) {
	select {
	case q.ch <- p:
	default:
		q.once.Do(func() { close(q.overflow) })
	}
}

// overflowed reports whether a push was dropped. A stream checks it before
// forwarding each push, so it never forwards one that came after a gap.
func (q *pushQueue) overflowed() bool {
	select {
	case <-q.overflow:
		return true
	default:
		return false
	}
}

func errStopping() error {
	return contract.Errorf(contract.CodeDaemonStopping, "the daemon is stopping")
}

// beforeStream is the error to answer when a stream could not start: a call
// cut short by Close is the daemon stopping, not the call's own failure.
func (s *Server) beforeStream(err error) error {
	if s.stopping() {
		return errStopping()
	}
	return err
}

// streamLeaseRequest follows one lease request until it settles.
func (s *Server) streamLeaseRequest(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	release, err := s.openStream(tok)
	if err != nil {
		return err
	}
	defer release()
	id := r.PathValue("id")
	ctx, cancel := s.streamContext(r)
	defer cancel()
	st, err := callAs[contract.LeaseRequestStatus](ctx, s, tok, contract.OpLeaseRequestGet, contract.LeaseRequestGetInput{RequestID: id})
	if err != nil {
		return s.beforeStream(hideRequest(tok, err, id))
	}
	// An EventSource reconnects whenever a stream ends; one that already
	// saw the settled request is told to stop (204 ends its retries).
	if st.Request.State.Terminal() && r.Header.Get("Last-Event-ID") == strconv.FormatUint(st.Rev, 10) {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	sw, err := startSSE(w)
	if err != nil {
		return nil
	}
	// Each wait doubles as the keepalive period: a wait that ends with
	// nothing new is answered with a keepalive comment.
	waitMs := min(max(s.keepAlive.Milliseconds(), 1), contract.MaxRequestWaitMs)
	first, last := true, uint64(0)
	for {
		if first || st.Rev != last {
			first, last = false, st.Rev
			v := s.requestView(ctx, tok, st)
			if err := sw.event(v.State, strconv.FormatUint(st.Rev, 10), v); err != nil {
				return nil
			}
			if st.Request.State.Terminal() {
				return nil
			}
		} else if err := sw.comment("keepalive"); err != nil {
			return nil
		}
		in := contract.LeaseRequestGetInput{RequestID: id, AfterRev: last, WaitMs: waitMs}
		st, err = callAs[contract.LeaseRequestStatus](ctx, s, tok, contract.OpLeaseRequestGet, in)
		if err != nil {
			if ctx.Err() == nil {
				_ = sw.event("error", "", errorBody{Error: asError(hideRequest(tok, err, id))})
			}
			sayRevoked(ctx, sw)
			return nil
		}
	}
}

// leaseLostView is the data of a lease_lost event.
type leaseLostView = apiview.LeaseLostView

// streamLease tells the client when its lease ends for any reason but its
// own release.
func (s *Server) streamLease(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	release, err := s.openStream(tok)
	if err != nil {
		return err
	}
	defer release()
	id := r.PathValue("id")
	ctx, cancel := s.streamContext(r)
	defer cancel()
	q := newPushQueue()
	if _, err := s.be.Call(ctx, tok, contract.OpLeaseWatch, contract.LeaseIDInput{LeaseID: id}, q.push); err != nil {
		return s.beforeStream(hideLease(tok, err, id))
	}
	sw, err := startSSE(w)
	if err != nil {
		return nil
	}
	keepAlive := time.NewTicker(s.keepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			sayRevoked(ctx, sw)
			return nil
		case <-q.overflow:
			s.log.Warn("lease stream fell behind; ending it", "leaseId", id)
			return nil
		case <-keepAlive.C:
			if err := sw.comment("keepalive"); err != nil {
				return nil
			}
		case p := <-q.ch:
			switch p.Push {
			case contract.PushDeviceUnhealthy:
				if err := sw.event("device_unhealthy", "", deviceNotice{LeaseID: id, DeviceID: p.DeviceID}); err != nil {
					return nil
				}
				continue
			case contract.PushDeviceRecovered:
				if err := sw.event("device_recovered", "", deviceNotice{LeaseID: id, DeviceID: p.DeviceID, Attempts: &p.Attempts}); err != nil {
					return nil
				}
				continue
			case contract.PushLeaseLost:
			default:
				continue
			}
			v := leaseLostView{LeaseID: p.LeaseID, DeviceID: p.DeviceID, Reason: p.Reason}
			if v.LeaseID == "" {
				v.LeaseID = id
			}
			_ = sw.event("lease_lost", "", v)
			return nil
		}
	}
}

// lastEventID reads where a resumed event stream left off: the Last-Event-ID
// header an EventSource sends on reconnecting, or ?lastEventId= for clients
// that cannot set headers.
func lastEventID(r *http.Request) (seq int64, resume bool, err error) {
	field, raw := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if raw == "" {
		field, raw = "lastEventId", r.URL.Query().Get("lastEventId")
	}
	if raw == "" {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(raw, 10, 64)
	if perr != nil || n < 0 {
		return 0, false, contract.BadRequest(field, "must be an event seq (a whole number >= 0), got %q", raw)
	}
	return n, true, nil
}

// streamEvents sends every event the daemon publishes, after replaying the
// ones a resuming client missed.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, tok contract.TokenRecord) error {
	release, err := s.openStream(tok)
	if err != nil {
		return err
	}
	defer release()
	after, resume, err := lastEventID(r)
	if err != nil {
		return err
	}
	ctx, cancel := s.streamContext(r)
	defer cancel()
	// Subscribe before replaying: an event committed before the
	// subscription is in the store, one after it is pushed, and LastSeq is
	// the boundary between the two.
	q := newPushQueue()
	res, err := s.be.Call(ctx, tok, contract.OpEventsSubscribe, contract.Empty{}, q.push)
	if err != nil {
		return s.beforeStream(err)
	}
	sub, err := convert[contract.EventsSubscribeResult](res)
	if err != nil {
		return err
	}
	sw, err := startSSE(w)
	if err != nil {
		return nil
	}
	sent := sub.LastSeq
	if resume {
		if sent, err = s.replayInto(ctx, sw, tok, after, sub.LastSeq); err != nil {
			if ctx.Err() == nil && !isWriteErr(err) {
				_ = sw.event("error", "", errorBody{Error: asError(err)})
			}
			sayRevoked(ctx, sw)
			return nil
		}
		sent = max(sent, sub.LastSeq)
	}
	keepAlive := time.NewTicker(s.keepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			sayRevoked(ctx, sw)
			return nil
		case <-q.overflow:
			s.log.Warn("event stream fell behind; ending it")
			return nil
		case <-keepAlive.C:
			if err := sw.comment("keepalive"); err != nil {
				return nil
			}
		case p := <-q.ch:
			if q.overflowed() {
				s.log.Warn("event stream fell behind; ending it")
				return nil
			}
			if p.Push != contract.PushEvent || p.Event == nil || p.Event.Seq <= sent {
				continue
			}
			if err := sw.event("", strconv.FormatInt(p.Event.Seq, 10), p.Event); err != nil {
				return nil
			}
			sent = p.Event.Seq
		}
	}
}

// writeErr marks a failure to write to the client, after which there is no
// one to tell about it.
type writeErr struct{ err error }

func (e writeErr) Error() string { return "write event stream: " + e.err.Error() }
func (e writeErr) Unwrap() error { return e.err }

func isWriteErr(err error) bool {
	_, ok := errors.AsType[writeErr](err)
	return ok
}

// replayInto sends the stored events after seq after, up to and including
// upTo, and returns the last seq sent (after when none was).
func (s *Server) replayInto(ctx context.Context, sw *sseWriter, tok contract.TokenRecord, after, upTo int64) (int64, error) {
	cursor := after
	for cursor < upTo {
		in := contract.EventsReplayInput{AfterSeq: cursor, Limit: replayPage}
		if cursor == 0 {
			// afterSeq 0 is "absent", which replays the newest events;
			// sinceTs 1 replays from the oldest instead.
			in = contract.EventsReplayInput{SinceTs: 1, Limit: replayPage}
		}
		page, err := callAs[contract.EventsReplayResult](ctx, s, tok, contract.OpEventsReplay, in)
		if err != nil {
			return cursor, err
		}
		progressed := false
		for _, ev := range page.Events {
			if ev.Seq <= cursor {
				continue
			}
			if ev.Seq > upTo {
				// Pushed live; sending it here too would duplicate it.
				return cursor, nil
			}
			if err := sw.event("", strconv.FormatInt(ev.Seq, 10), ev); err != nil {
				return cursor, writeErr{err}
			}
			cursor, progressed = ev.Seq, true
		}
		if !progressed || len(page.Events) < replayPage {
			break
		}
	}
	return cursor, nil
}

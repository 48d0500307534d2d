package uplink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/wire"
)

func TestEachLineWrittenIsOneTextMessage(t *testing.T) {
	gw, raw := rawPair(t, Options{})
	for _, w := range []string{"{\"a\":1}\n", "{\"b\":2}\n{\"c\":3}\n", "{\"half", "\":1}\n"} {
		if n, err := gw.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("write %q: %d, %v", w, n, err)
		}
	}
	for i, want := range []string{`{"a":1}`, `{"b":2}`, `{"c":3}`, `{"half":1}`} {
		typ, got := readMessage(t, raw)
		if typ != websocket.MessageText || got != want {
			t.Fatalf("message %d: %v %q, want a text message %q", i, typ, got, want)
		}
	}
}

func TestEachTextMessageReadsAsOneFrame(t *testing.T) {
	gw, raw := rawPair(t, Options{MaxFrame: 64})
	atLimit := `{"s":"` + strings.Repeat("x", 64-8) + `"}`
	sent := []string{`{"a":1}`, `{"b":[1,2]}`, atLimit}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	for _, m := range sent {
		if err := raw.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatalf("bare websocket write: %v", err)
		}
	}
	r := wire.NewReader(gw, contract.MaxFrameLen)
	for i, want := range sent {
		if got := readFrame(t, r, gw); got != want {
			t.Fatalf("frame %d: %q, want %q", i, got, want)
		}
	}
}

func TestFramesCrossADialledUplinkBothWays(t *testing.T) {
	worker, gw := pair(t, Options{})
	ww, gwr := wire.NewWriter(worker), wire.NewReader(gw, contract.MaxFrameLen)
	gww, wr := wire.NewWriter(gw), wire.NewReader(worker, contract.MaxFrameLen)
	for i := range 3 {
		if err := gww.Write(map[string]int{"call": i}); err != nil {
			t.Fatalf("gateway write: %v", err)
		}
		if got, want := readFrame(t, wr, worker), fmt.Sprintf(`{"call":%d}`, i); got != want {
			t.Fatalf("worker read %q, want %q", got, want)
		}
		if err := ww.Write(map[string]int{"answer": i}); err != nil {
			t.Fatalf("worker write: %v", err)
		}
		if got, want := readFrame(t, gwr, gw), fmt.Sprintf(`{"answer":%d}`, i); got != want {
			t.Fatalf("gateway read %q, want %q", got, want)
		}
	}
}

func TestConcurrentWritesKeepEachWritesLinesTogether(t *testing.T) {
	gw, raw := rawPair(t, Options{})
	const writers, writes = 8, 50
	line := func(g, i, part int) string {
		return fmt.Sprintf(`{"writer":%d,"write":%d,"part":%d,"pad":%q}`, g, i, part, strings.Repeat("p", 100*g))
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range writes {
				if _, err := gw.Write([]byte(line(g, i, 1) + "\n" + line(g, i, 2) + "\n")); err != nil {
					t.Errorf("writer %d: %v", g, err)
					return
				}
			}
		})
	}
	next := make([]int, writers) // the write each writer's next message must come from
	for range writers * writes {
		_, first := readMessage(t, raw)
		_, second := readMessage(t, raw)
		var g, i, part int
		if _, err := fmt.Sscanf(first, `{"writer":%d,"write":%d,"part":%d,`, &g, &i, &part); err != nil || g < 0 || g >= writers {
			t.Fatalf("message %q is not a line that was written", first)
		}
		if first != line(g, i, 1) || second != line(g, i, 2) || i != next[g] {
			t.Fatalf("messages %q then %q, want the two lines of writer %d's write %d, in order", first, second, g, next[g])
		}
		next[g]++
	}
	wg.Wait()
}

func TestAMessageThatBreaksTheFramingClosesTheUplink(t *testing.T) {
	for _, tc := range []struct {
		name   string
		typ    websocket.MessageType
		msg    string
		code   websocket.StatusCode
		reason string
	}{
		{"binary", websocket.MessageBinary, `{"a":1}`, websocket.StatusUnsupportedData, "binary message: frames are text"},
		{"newline", websocket.MessageText, "{\"a\":1}\n{\"b\":2}", websocket.StatusPolicyViolation, "message holds a newline: one frame per message"},
		{"oversized", websocket.MessageText, `{"s":"` + strings.Repeat("x", 64-7) + `"}`, websocket.StatusMessageTooBig, "message over 64 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, raw := rawPair(t, Options{MaxFrame: 64})
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			if err := raw.Write(ctx, tc.typ, []byte(tc.msg)); err != nil {
				t.Fatalf("bare websocket write: %v", err)
			}
			err := waitErr(t, readErr(gw), "read of the refusing end")
			if websocket.CloseStatus(err) != tc.code || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("the refusing end read %v, want status %v and reason %q", err, tc.code, tc.reason)
			}
			_, _, err = raw.Read(ctx)
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != tc.code || ce.Reason != tc.reason {
				t.Errorf("the refused peer read %v, want status %v and reason %q", err, tc.code, tc.reason)
			}
		})
	}
}

func TestAReadDeadlineInThePastInterruptsABlockedRead(t *testing.T) {
	worker, gw := pair(t, Options{})
	errc := readErr(gw)
	select {
	case err := <-errc:
		t.Fatalf("read returned before anything was sent or any deadline set: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	gw.SetReadDeadline(time.Now())
	if err := waitErr(t, errc, "read after a deadline in the past"); !isTimeout(err) {
		t.Fatalf("interrupted read: %v, want a timeout", err)
	}
	// A read that timed out leaves the uplink as it was, both ways.
	gw.SetReadDeadline(time.Time{})
	if _, err := worker.Write([]byte("{\"after\":1}\n")); err != nil {
		t.Fatalf("worker write after the timeout: %v", err)
	}
	if got := readFrame(t, wire.NewReader(gw, contract.MaxFrameLen), gw); got != `{"after":1}` {
		t.Fatalf("frame after the timeout: %q", got)
	}
	if _, err := gw.Write([]byte("{\"answer\":1}\n")); err != nil {
		t.Fatalf("gateway write after the timeout: %v", err)
	}
	if got := readFrame(t, wire.NewReader(worker, contract.MaxFrameLen), worker); got != `{"answer":1}` {
		t.Fatalf("answer after the timeout: %q", got)
	}
}

func TestAReadDeadlinePassingTimesTheReadOut(t *testing.T) {
	_, gw := pair(t, Options{})
	dl := time.Now().Add(100 * time.Millisecond)
	gw.SetReadDeadline(dl)
	err := waitErr(t, readErr(gw), "read past its deadline")
	if !isTimeout(err) {
		t.Fatalf("read past its deadline: %v, want a timeout", err)
	}
	if early := time.Until(dl); early > 0 {
		t.Fatalf("read timed out %v before its deadline", early)
	}
}

func TestAWriteDeadlineInThePastFailsTheWriteAndKeepsTheUplink(t *testing.T) {
	gw, raw := rawPair(t, Options{})
	gw.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := gw.Write([]byte("{\"late\":1}\n")); !isTimeout(err) {
		t.Fatalf("write past its deadline: %v, want a timeout", err)
	}
	gw.SetWriteDeadline(time.Time{})
	if _, err := gw.Write([]byte("{\"next\":1}\n")); err != nil {
		t.Fatalf("write once the deadline is cleared: %v", err)
	}
	if _, m := readMessage(t, raw); m != `{"next":1}` {
		t.Fatalf("the peer read %q, want only the write made within its deadline", m)
	}
}

func TestAWriteDeadlineEndsAWriteToAPeerThatReadsNothing(t *testing.T) {
	gw, _ := rawPair(t, Options{})
	line := []byte(`{"s":"` + strings.Repeat("x", 256<<10) + "\"}\n")
	dl := time.Now().Add(200 * time.Millisecond)
	gw.SetWriteDeadline(dl)
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := gw.Write(line); err != nil {
				errc <- err
				return
			}
		}
	}()
	if err := waitErr(t, errc, "writes to a peer that reads nothing"); !isTimeout(err) {
		t.Fatalf("blocked write: %v, want a timeout", err)
	}
	err := waitErr(t, readErr(gw), "read after the write timed out")
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation || !strings.Contains(err.Error(), "write timed out") {
		t.Fatalf("read after the write timed out: %v, want the uplink closed for it", err)
	}
}

func TestASilentPeerIsClosedAfterThreeMissedPings(t *testing.T) {
	const hb = 50 * time.Millisecond
	start := time.Now()
	// The bare websocket is never read, so it never answers a ping.
	gw, _ := rawPair(t, Options{Heartbeat: hb})
	err := waitErr(t, readErr(gw), "read from a silent peer")
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation || !strings.Contains(err.Error(), "heartbeat: peer silent") {
		t.Fatalf("read from a silent peer: %v, want the heartbeat's close", err)
	}
	// The first ping goes a heartbeat in, and each is given a heartbeat to
	// be answered: the third miss is four heartbeats in.
	if took := time.Since(start); took < 4*hb {
		t.Fatalf("closed after %v, before 3 pings could go unanswered", took)
	}
}

func TestALivePeerIsKept(t *testing.T) {
	const hb = 50 * time.Millisecond
	// The worker's end is not read by anyone: its read loop answers the
	// gateway's pings all the same.
	worker, gw := pair(t, Options{Heartbeat: hb})
	errc := readErr(gw)
	select {
	case err := <-errc:
		t.Fatalf("the gateway's read ended with the peer alive: %v", err)
	case <-worker.Done():
		t.Fatal("the worker's end closed with the peer alive")
	case <-gw.Done():
		t.Fatal("the gateway's end closed with the peer alive")
	case <-time.After(20 * hb):
	}
	if _, err := worker.Write([]byte("{\"still\":1}\n")); err != nil {
		t.Fatalf("write after 20 heartbeats: %v", err)
	}
	if err := waitErr(t, errc, "read after 20 heartbeats"); err != nil {
		t.Fatalf("read after 20 heartbeats: %v", err)
	}
}

func TestCloseIsNormalAndIdempotent(t *testing.T) {
	worker, gw := pair(t, Options{})
	for i := range 2 {
		if err := worker.Close(); err != nil {
			t.Fatalf("close %d: %v", i+1, err)
		}
	}
	if err := waitErr(t, readErr(gw), "the peer's read after a close"); err != io.EOF {
		t.Fatalf("the peer read %v after a normal close, want io.EOF", err)
	}
	if _, err := worker.Read(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v, want net.ErrClosed", err)
	}
	if _, err := worker.Write([]byte("{}\n")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v, want net.ErrClosed", err)
	}
}

func TestCloseWithTellsThePeerWhy(t *testing.T) {
	worker, gw := pair(t, Options{})
	gw.CloseWith(websocket.StatusGoingAway, "gateway stopping")
	err := waitErr(t, readErr(worker), "the peer's read after CloseWith")
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway || ce.Reason != "gateway stopping" {
		t.Fatalf("the peer read %v, want status going away and the reason", err)
	}
}

func TestCloseGivesUpOnAPeerThatNeverAnswers(t *testing.T) {
	const hb = 50 * time.Millisecond
	// The bare websocket is never read, so it never answers the close.
	gw, _ := rawPair(t, Options{Heartbeat: hb})
	start := time.Now()
	gw.Close()
	select {
	case <-gw.Done():
	case <-time.After(time.Second):
		t.Fatalf("Close still waited for the peer's answer after %v; its grace is one heartbeat, %v", time.Since(start), hb)
	}
}

// A Conn that refuses a peer has no read of its own under way, so the
// websocket's handshake reader waits for the peer's close alone: the grace
// must cut that wait short too, by closing the socket beneath it.
func TestARefusedPeerThatNeverAnswersTheCloseIsDroppedAfterOneHeartbeat(t *testing.T) {
	const hb = 50 * time.Millisecond
	gw, raw := rawPair(t, Options{Heartbeat: hb})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	start := time.Now()
	if err := raw.Write(ctx, websocket.MessageBinary, []byte("{}")); err != nil {
		t.Fatalf("write: %v", err)
	}
	select {
	case <-gw.Done():
	case <-time.After(time.Second):
		t.Fatalf("the Conn still waited for the refused peer's close after %v; its grace is one heartbeat, %v", time.Since(start), hb)
	}
}

func TestADialledConnRefusingAPeerThatNeverAnswersIsDroppedAfterOneHeartbeat(t *testing.T) {
	const hb = 50 * time.Millisecond
	raws := make(chan *websocket.Conn, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		raws <- raw
		<-release
		raw.CloseNow()
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	worker, err := Dial(ctx, srv.URL, "token", "worker-1", "Worker 1", Options{Heartbeat: hb})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	raw := <-raws
	start := time.Now()
	if err := raw.Write(ctx, websocket.MessageBinary, []byte("{}")); err != nil {
		t.Fatalf("write: %v", err)
	}
	select {
	case <-worker.Done():
	case <-time.After(time.Second):
		t.Fatalf("the dialled Conn still waited for the refused peer's close after %v; its grace is one heartbeat, %v", time.Since(start), hb)
	}
}

func TestClosingEndsEveryGoroutineOfTheConn(t *testing.T) {
	before := goleak.IgnoreCurrent()
	srv, conns := gateway(t, Options{Heartbeat: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	worker, err := Dial(ctx, srv.URL, "token", "worker-1", "Worker 1", Options{Heartbeat: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	gw := accepted(t, conns)
	if _, err := worker.Write([]byte("{}\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got := readFrame(t, wire.NewReader(gw, contract.MaxFrameLen), gw); got != "{}" {
		t.Fatalf("frame %q", got)
	}
	closeAndWait(t, worker)
	closeAndWait(t, gw)
	srv.Close()
	goleak.VerifyNone(t, before)
}

// Ping is answered by the peer's reader, which nobody else need read
// from, and says how long the round trip took; a peer that never reads
// leaves it to its context.
func TestPingTimesTheRoundTripToAPeerThatReads(t *testing.T) {
	worker, gw := pair(t, Options{})
	_ = gw // its read loop answers, read by nobody
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rtt, err := worker.Ping(ctx)
	if err != nil || rtt <= 0 {
		t.Fatalf("Ping = %v, %v; want a round trip", rtt, err)
	}
	silent, _ := rawPair(t, Options{})
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := silent.Ping(short); err == nil {
		t.Error("a ping to a peer that never reads was answered")
	}
}

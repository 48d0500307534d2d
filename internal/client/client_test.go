package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/wire"
)

// fakeDaemon answers frames with a function of the request; pushes may be
// written with w before the answer.
func fakeDaemon(t *testing.T, answer func(req contract.Request, w *wire.Writer)) net.Conn {
	t.Helper()
	cli, srv := net.Pipe()
	go func() {
		defer srv.Close()
		w := wire.NewWriter(srv)
		sc := bufio.NewScanner(srv)
		for sc.Scan() {
			var req contract.Request
			if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
				return
			}
			if req.Op == contract.OpHello {
				res, _ := json.Marshal(contract.HelloResult{Protocol: 1, Role: contract.RoleAgent, Principal: "p"})
				w.Write(contract.Response{ID: req.ID, Result: res})
				continue
			}
			answer(req, w)
		}
	}()
	return cli
}

func TestProgressGoesToTheCallThatMadeIt(t *testing.T) {
	conn := fakeDaemon(t, func(req contract.Request, w *wire.Writer) {
		w.Write(contract.Push{Push: contract.PushProgress, ID: req.ID, Progress: &contract.LeaseProgress{Stage: contract.StageQueued, QueuePosition: 2}})
		w.Write(contract.Push{Push: contract.PushProgress, ID: json.RawMessage(`"someone-else"`), Progress: &contract.LeaseProgress{Stage: contract.StageBooting}})
		res, _ := json.Marshal(contract.LeaseGrant{RequestID: "req_1"})
		w.Write(contract.Response{ID: req.ID, Result: res})
	})
	c, err := New(context.Background(), conn, contract.HelloInput{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var seen []contract.LeaseProgress
	g, err := c.RequestLease(context.Background(), contract.LeaseRequestInput{Platform: "ios"}, func(p contract.LeaseProgress) { seen = append(seen, p) })
	if err != nil || g.RequestID != "req_1" {
		t.Fatalf("grant = %+v, %v", g, err)
	}
	if len(seen) != 1 || seen[0].QueuePosition != 2 {
		t.Errorf("progress = %+v, want only this call's queued push", seen)
	}
}

func TestDaemonErrorsKeepTheirCode(t *testing.T) {
	conn := fakeDaemon(t, func(req contract.Request, w *wire.Writer) {
		w.Write(contract.Response{ID: req.ID, Error: contract.Errorf(contract.CodeUnknownLease, "no lease").With("leaseId", "lse_x")})
	})
	c, err := New(context.Background(), conn, contract.HelloInput{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Renew(context.Background(), "lse_x", 0)
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != contract.CodeUnknownLease || ce.Details["leaseId"] != "lse_x" {
		t.Errorf("err = %v", err)
	}
}

func TestConnectionLossFailsCallsInFlight(t *testing.T) {
	cli, srv := net.Pipe()
	go func() {
		sc := bufio.NewScanner(srv)
		w := wire.NewWriter(srv)
		sc.Scan() // hello
		var req contract.Request
		json.Unmarshal(sc.Bytes(), &req)
		res, _ := json.Marshal(contract.HelloResult{Protocol: 1})
		w.Write(contract.Response{ID: req.ID, Result: res})
		sc.Scan() // the call: drop the connection instead of answering
		srv.Close()
	}()
	c, err := New(context.Background(), cli, contract.HelloInput{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(context.Background())
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != contract.CodeDaemonConnectionLost {
		t.Errorf("err = %v, want DAEMON_CONNECTION_LOST", err)
	}
	<-c.Done()
}

func TestSubscriptionSeesPushesSentRightAfterItsAnswer(t *testing.T) {
	conn := fakeDaemon(t, func(req contract.Request, w *wire.Writer) {
		res, _ := json.Marshal(contract.EventsSubscribeResult{SubscriptionID: "sub_1", LastSeq: 7})
		w.Write(contract.Response{ID: req.ID, Result: res})
		for seq := int64(8); seq <= 10; seq++ {
			w.Write(contract.Push{Push: contract.PushEvent, SubscriptionID: "sub_1", Event: &contract.Event{Seq: seq}})
		}
	})
	c, err := New(context.Background(), conn, contract.HelloInput{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, last, err := c.Subscribe(context.Background())
	if err != nil || last != 7 {
		t.Fatalf("subscribe: %d, %v", last, err)
	}
	for want := int64(8); want <= 10; want++ {
		select {
		case ev := <-ch:
			if ev.Seq != want {
				t.Fatalf("event seq %d, want %d", ev.Seq, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d never arrived: its push was dropped", want)
		}
	}
}

func TestAnOutOfBoundsProgressPushIsDroppedNotFatal(t *testing.T) {
	conn := fakeDaemon(t, func(req contract.Request, w *wire.Writer) {
		w.WriteRaw([]byte(`{"push":"progress","id":` + string(req.ID) + `,"progress":{"stage":"downloading","component":"26.4","waiting":false,"percent":101}}` + "\n"))
		n := 41
		w.Write(contract.Push{Push: contract.PushProgress, ID: req.ID, Progress: &contract.LeaseProgress{Stage: contract.StageDownloading, Component: "26.4", Percent: &n}})
		res, _ := json.Marshal(contract.LeaseGrant{RequestID: "req_1"})
		w.Write(contract.Response{ID: req.ID, Result: res})
	})
	c, err := New(context.Background(), conn, contract.HelloInput{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var seen []contract.LeaseProgress
	g, err := c.RequestLease(context.Background(), contract.LeaseRequestInput{Platform: "ios"}, func(p contract.LeaseProgress) { seen = append(seen, p) })
	if err != nil || g.RequestID != "req_1" {
		t.Fatalf("grant = %+v, %v", g, err)
	}
	if len(seen) != 1 || *seen[0].Percent != 41 {
		t.Errorf("progress = %+v, want only the valid 41%% step", seen)
	}
}

func TestResultFramesAreSplitWithoutScanningAndOthersDecodedInFull(t *testing.T) {
	for _, c := range []struct {
		frame      string
		id, result string
		ok         bool
	}{
		{`{"id":"12","result":{"a":[1,2]}}`, `"12"`, `{"a":[1,2]}`, true},
		{`{"id":"3","result":null}`, `"3"`, `null`, true},
		{`{"id":"3","error":{"code":"INTERNAL"}}`, "", "", false},
		{`{"push":"progress","id":"3","progress":{"stage":"queued"}}`, "", "", false},
		{`{"id":"x","result":1}`, "", "", false},
		{`{"id":"1","result":}`, "", "", false},
	} {
		id, result, ok := splitResult([]byte(c.frame))
		if ok != c.ok || string(id) != c.id || string(result) != c.result {
			t.Errorf("%s: got %q %q %v, want %q %q %v", c.frame, id, result, ok, c.id, c.result, c.ok)
		}
	}
}

func TestAMalformedResultIsADecodeErrorAndTheSessionGoesOn(t *testing.T) {
	conn := fakeDaemon(t, func(req contract.Request, w *wire.Writer) {
		if req.Op == contract.OpStatusGet {
			_ = w.WriteRaw([]byte(`{"id":` + string(req.ID) + `,"result":{"daemon":}` + "\n"))
			return
		}
		_ = w.Write(contract.Response{ID: req.ID, Result: json.RawMessage(`{"leases":[]}`)})
	})
	c, err := New(context.Background(), conn, contract.HelloInput{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Status(context.Background()); err == nil {
		t.Fatal("a malformed status decoded without error")
	}
	if _, err := c.Leases(context.Background()); err != nil {
		t.Fatalf("the next call on the session: %v", err)
	}
}

package uplink

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/simlock/simlock/internal/wire"
)

// waitLong bounds every wait for something that should happen at once.
const waitLong = 5 * time.Second

// gateway serves the uplink endpoint; each uplink it accepts, with opts,
// goes to the channel.
func gateway(t *testing.T, opts Options) (*httptest.Server, <-chan *Conn) {
	t.Helper()
	conns := make(chan *Conn, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r, opts)
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		conns <- c
	}))
	t.Cleanup(srv.Close)
	return srv, conns
}

func accepted(t *testing.T, conns <-chan *Conn) *Conn {
	t.Helper()
	select {
	case c := <-conns:
		return c
	case <-time.After(waitLong):
		t.Fatal("the gateway accepted no uplink")
		return nil
	}
}

// pair is a worker's uplink, dialled with Dial, and the gateway's end of
// it, both with opts.
func pair(t *testing.T, opts Options) (worker, gw *Conn) {
	t.Helper()
	srv, conns := gateway(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	worker, err := Dial(ctx, srv.URL, "token", "worker-1", "Worker 1", opts)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	gw = accepted(t, conns)
	t.Cleanup(func() {
		closeAndWait(t, worker)
		closeAndWait(t, gw)
	})
	return worker, gw
}

// rawPair is the gateway's end of an uplink whose worker is a bare
// websocket, which the test drives message by message. The bare end
// answers pings only while the test reads it.
func rawPair(t *testing.T, opts Options) (gw *Conn, raw *websocket.Conn) {
	t.Helper()
	srv, conns := gateway(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	raw, _, err := websocket.Dial(ctx, srv.URL+Path, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	gw = accepted(t, conns)
	t.Cleanup(func() {
		// Dropped first, so the Conn's close handshake does not wait for
		// a peer that may not be reading.
		raw.CloseNow()
		closeAndWait(t, gw)
	})
	return gw, raw
}

func closeAndWait(t *testing.T, c *Conn) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(waitLong):
		t.Errorf("the uplink had not finished closing %v after Close", waitLong)
	}
}

// readFrame reads one frame, bounded by a read deadline.
func readFrame(t *testing.T, r *wire.Reader, c *Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitLong))
	defer c.SetReadDeadline(time.Time{})
	b, err := r.Next()
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	return string(b)
}

// readMessage reads one message of a bare websocket.
func readMessage(t *testing.T, raw *websocket.Conn) (websocket.MessageType, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	typ, b, err := raw.Read(ctx)
	if err != nil {
		t.Fatalf("bare websocket read: %v", err)
	}
	return typ, string(b)
}

// readErr runs a Read of c and delivers its error.
func readErr(c *Conn) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 64<<10))
		errc <- err
	}()
	return errc
}

func waitErr(t *testing.T, errc <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(waitLong):
		t.Fatalf("%s: still blocked after %v", what, waitLong)
		return nil
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
}

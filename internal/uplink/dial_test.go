package uplink

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/wire"
)

func TestDialSendsTheWorkersHeaders(t *testing.T) {
	conns := make(chan *Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range []struct{ name, got, want string }{
			{"path", r.URL.Path, "/gw" + Path},
			{"Authorization", r.Header.Get("Authorization"), "Bearer s3cret"},
			{HeaderWorkerID, r.Header.Get(HeaderWorkerID), "mac-mini-3"},
			{HeaderWorkerLabel, r.Header.Get(HeaderWorkerLabel), "Mac mini · rack 3"},
		} {
			if h.got != h.want {
				t.Errorf("the gateway got %s %q, want %q", h.name, h.got, h.want)
			}
		}
		c, err := Accept(w, r, Options{})
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		conns <- c
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	worker, err := Dial(ctx, srv.URL+"/gw/", "s3cret", "mac-mini-3", "Mac mini · rack 3", Options{})
	// The context bounds the handshake only: the uplink outlives it.
	cancel()
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	gw := accepted(t, conns)
	defer closeAndWait(t, gw)
	defer closeAndWait(t, worker)
	if _, err := worker.Write([]byte("{\"hello\":1}\n")); err != nil {
		t.Fatalf("write once the dial context is done: %v", err)
	}
	if got := readFrame(t, wire.NewReader(gw, contract.MaxFrameLen), gw); got != `{"hello":1}` {
		t.Fatalf("frame %q", got)
	}
}

func TestDialRefusedByStatusGivesRefusedError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		ctype  string
		body   string
		want   RefusedError
	}{
		{"json error body", http.StatusUnauthorized, "application/json",
			`{"error":{"code":"UNAUTHENTICATED","message":"the join token is not valid"}}`,
			RefusedError{Status: http.StatusUnauthorized, Code: contract.CodeUnauthenticated, Message: "the join token is not valid"}},
		{"plain body", http.StatusForbidden, "text/plain", "forbidden\n", RefusedError{Status: http.StatusForbidden}},
		{"no body", http.StatusServiceUnavailable, "", "", RefusedError{Status: http.StatusServiceUnavailable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.ctype != "" {
					w.Header().Set("Content-Type", tc.ctype)
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			defer http.DefaultClient.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			c, err := Dial(ctx, srv.URL, "token", "worker-1", "Worker 1", Options{})
			if c != nil {
				c.Close()
			}
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("dial: %v, want a *RefusedError", err)
			}
			if !reflect.DeepEqual(*re, tc.want) {
				t.Fatalf("refusal %+v, want %+v", *re, tc.want)
			}
		})
	}
}

func TestDialRefusesWhatItCannotSend(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the gateway got a request: %s %s", r.Method, r.URL)
	}))
	defer srv.Close()
	for _, tc := range []struct{ name, url, id, label, want string }{
		{"scheme", "ftp://" + srv.Listener.Addr().String(), "worker-1", "Worker 1", "want http://host[:port] or https://host[:port]"},
		{"no host", "http://", "worker-1", "Worker 1", "want http://host[:port] or https://host[:port]"},
		{"worker id", srv.URL, "worker/1", "Worker 1", HeaderWorkerID + ": must use only"},
		{"label", srv.URL, "worker-1", "Worker\n1", HeaderWorkerLabel + ": must be printable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			c, err := Dial(ctx, tc.url, "token", tc.id, tc.label, Options{})
			if err == nil {
				c.Close()
				t.Fatal("dial succeeded")
			}
			var re *RefusedError
			if errors.As(err, &re) {
				t.Fatalf("dial: %v, a refusal by a gateway that should not have been asked", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("dial: %v, want it to say %q", err, tc.want)
			}
		})
	}
}

package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// oneToken is a Backend that knows one agent token and answers no call.
type oneToken struct{}

func (oneToken) Authenticate(_ context.Context, secret string) (contract.TokenRecord, error) {
	if secret != "slk_a" {
		return contract.TokenRecord{}, contract.Errorf(contract.CodeUnauthenticated, "unknown or revoked token")
	}
	return contract.TokenRecord{ID: "tok_a", Role: contract.TokenAgent}, nil
}
func (oneToken) Call(context.Context, contract.TokenRecord, contract.Op, any, func(contract.Push)) (any, error) {
	return nil, contract.Errorf(contract.CodeInternal, "no calls here")
}
func (oneToken) Uplink(http.ResponseWriter, *http.Request, contract.TokenRecord) error {
	return contract.Errorf(contract.CodeForbidden, "no uplink here")
}
func (oneToken) UplinkRefused(*http.Request, *contract.Error) {}

// A streamed route (an upload) takes its body as it comes, within its own
// limit and idle bound: a declared length over the limit is refused before
// the handler runs, a body that stalls or runs over is cut with the code
// the handler's read returns, a refusal does not wait for the body, and a
// body that keeps coming is read whole. Each refusal closes the connection.
func TestAStreamedRouteBoundsItsBodyAsItReads(t *testing.T) {
	s := New(Options{Backend: oneToken{}})
	defer s.Close()
	got := make(chan int64, 10)
	s.handleBody("PUT /v1/test-upload", accessAgent, bodyPolicy{max: 100, streamed: true, idle: 200 * time.Millisecond},
		func(w http.ResponseWriter, r *http.Request, _ contract.TokenRecord) error {
			if r.URL.Query().Get("refuse") != "" {
				return contract.Errorf(contract.CodeForbidden, "refused before reading")
			}
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				return err
			}
			got <- n
			w.WriteHeader(http.StatusNoContent)
			return nil
		})
	srv := httptest.NewServer(s)
	defer srv.Close()

	send := func(path, head, body string, trickle bool) (status int, code contract.Code, closed bool) {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer slk_a\r\n%s\r\n", path, head)
		done := make(chan struct{})
		defer close(done)
		go func() {
			for i := 0; i < len(body); i++ {
				if _, err := conn.Write([]byte{body[i]}); err != nil {
					return
				}
				if trickle {
					select {
					case <-done:
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
		}()
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("PUT %s (%q): no answer: %v", path, head, err)
		}
		var eb struct {
			Error contract.Error `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode < 300 {
			return resp.StatusCode, "", false // kept: not waited on
		}
		_, err = io.Copy(io.Discard, br)
		return resp.StatusCode, eb.Error.Code, !errors.Is(err, os.ErrDeadlineExceeded)
	}

	if st, code, closed := send("/v1/test-upload", "Content-Length: 1000\r\n", "x", true); code != contract.CodeBodyTooLarge || !closed {
		t.Errorf("declared over the limit: %d %s, closed %v; want 413 BODY_TOO_LARGE and a closed connection", st, code, closed)
	}
	if st, code, closed := send("/v1/test-upload", "Content-Length: 50\r\n", "xxxxx", false); code != contract.CodeBodyTimeout || !closed {
		t.Errorf("stalled within the limit: %d %s, closed %v; want 408 BODY_TIMEOUT and a closed connection", st, code, closed)
	}
	chunked := strings.Repeat("20\r\n"+strings.Repeat("x", 32)+"\r\n", 5) + "0\r\n\r\n"
	if st, code, closed := send("/v1/test-upload", "Transfer-Encoding: chunked\r\n", chunked, false); code != contract.CodeBodyTooLarge || !closed {
		t.Errorf("chunked over the limit: %d %s, closed %v; want 413 BODY_TOO_LARGE and a closed connection", st, code, closed)
	}
	if st, code, closed := send("/v1/test-upload?refuse=1", "Content-Length: 50\r\n", "x", true); code != contract.CodeForbidden || !closed {
		t.Errorf("refused before reading: %d %s, closed %v; want 403 FORBIDDEN and a closed connection", st, code, closed)
	}
	// 20 bytes, one every 50 ms: 1 s in all, each within the idle bound.
	if st, _, _ := send("/v1/test-upload", "Content-Length: 20\r\n", strings.Repeat("y", 20), true); st != http.StatusNoContent {
		t.Errorf("a slow body that keeps coming: %d, want 204", st)
	} else if n := <-got; n != 20 {
		t.Errorf("the handler read %d bytes, want 20", n)
	}
}

// A refused body's connection lingers only while the server serves: Close
// ends it at once, so a daemon that stops leaves neither the connection
// nor its goroutine behind for the rest of the linger.
func TestCloseEndsALingeringConnection(t *testing.T) {
	s := New(Options{Backend: oneToken{}})
	srv := httptest.NewServer(s)
	defer srv.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "POST /v1/lease-requests HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer slk_a\r\nContent-Length: 100000\r\n\r\n{")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a declared 100000-byte body: %v, %v; want 413", resp, err)
	}
	// The end of the answer's stream: the server shut its side, and
	// lingers over the client's, which stays open.
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("reading to the end of the answer: %v", err)
	}

	s.Close()
	done := make(chan struct{})
	go func() {
		s.lingers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(lingerFor / 2):
		t.Fatalf("the refused body's connection still lingered %s after Close", lingerFor/2)
	}
}

package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/config"
)

// The HTTP listener does not keep a connection that sends no request, or a
// keep-alive connection nobody uses: each is closed past its bound.
func TestHTTPConnectionsThatSendNothingAreClosed(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"http":{"enabled":true,"port":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	const bound = 200 * time.Millisecond
	d, _ := startDaemonOpts(t, Options{Config: cfg, HTTPHeaderTimeout: bound, HTTPIdleTimeout: bound})
	addr := strings.TrimPrefix(d.httpURL, "http://")

	// closedWithin reports whether the server ends c within a wait far
	// beyond bound (and far below the defaults, 10 s and 2 min).
	closedWithin := func(c net.Conn, r io.Reader) bool {
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, err := io.Copy(io.Discard, r)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if !closedWithin(silent, silent) {
		t.Errorf("a connection that never sent its headers is still open 3s later (header bound %s)", bound)
	}

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(idle)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("healthz: %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	if !closedWithin(idle, r) {
		t.Errorf("an idle keep-alive connection is still open 3s later (idle bound %s)", bound)
	}
}

func TestTheConsoleURLNamesAHostABrowserCanOpen(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8787": "http://127.0.0.1:8787/",
		"0.0.0.0:8787":   "http://localhost:8787/",
		"[::]:8787":      "http://localhost:8787/",
		"[::1]:8787":     "http://[::1]:8787/",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := consoleURL(a); got != want {
			t.Errorf("consoleURL(%s) = %q, want %q", addr, got, want)
		}
	}
}

// A request whose headers pass 64 KiB is refused (431) before its token is
// looked at, and its connection closed; the daemon goes on serving.
func TestHTTPHeadersOverTheirBoundAreRefused(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"http":{"enabled":true,"port":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := startDaemon(t, cfg)
	addr := strings.TrimPrefix(d.httpURL, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	// 80 KiB of headers in lines of 1 KiB; the server may answer before
	// it has read them all.
	go func() {
		_, _ = io.WriteString(conn, "GET /v1/healthz HTTP/1.1\r\nHost: x\r\n")
		for i := range 80 {
			if _, err := fmt.Fprintf(conn, "X-Pad-%d: %s\r\n", i, strings.Repeat("a", 1000)); err != nil {
				return
			}
		}
		_, _ = io.WriteString(conn, "\r\n")
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("80 KiB of headers: no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("80 KiB of headers: %d, want 431", resp.StatusCode)
	}
	ok, err := http.Get(d.HTTPURL() + "/v1/healthz")
	if err != nil || ok.StatusCode != http.StatusOK {
		t.Fatalf("healthz after the refusal: %v, %v", ok, err)
	}
	ok.Body.Close()
}

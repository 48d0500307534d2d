package apiclient_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/apiclient"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemontest"
)

// httpDaemon starts a worker with its HTTP API on port 0 and returns it
// with an agent token's secret.
func httpDaemon(t *testing.T, opts ...daemontest.Option) (*daemontest.Daemon, string) {
	t.Helper()
	opts = append([]daemontest.Option{daemontest.Set("http.enabled", "true", "http.port", "0")}, opts...)
	d := daemontest.Start(t, opts...)
	var tok contract.TokenCreateResult
	if err := d.Admin().Call(context.Background(), contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenAgent, Label: "a"}, &tok); err != nil {
		t.Fatal(err)
	}
	return d, tok.Secret
}

func newClient(t *testing.T, o apiclient.Options) *apiclient.Client {
	t.Helper()
	c, err := apiclient.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func code(err error) contract.Code {
	var ce *contract.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

// A lease through the client: the progress of the wait arrives as the
// socket's steps, the grant names the device and the lease's full record,
// and renew, list, release answer as the socket's operations do.
func TestALeaseOverHTTPShowsItsStepsAndAnswersAsTheSocket(t *testing.T) {
	d, secret := httpDaemon(t, daemontest.DemoTimes(50*time.Millisecond, 50*time.Millisecond))
	c := newClient(t, apiclient.Options{URL: d.HTTPURL(), Token: secret})
	ctx := t.Context()

	var stages []contract.Stage
	g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, func(p contract.LeaseProgress) {
		if len(stages) == 0 || stages[len(stages)-1] != p.Stage {
			stages = append(stages, p.Stage)
		}
	})
	if err != nil {
		t.Fatalf("RequestLease: %v", err)
	}
	if !containsStage(stages, contract.StageProvisioning) || !containsStage(stages, contract.StageBooting) {
		t.Errorf("progress stages = %v, want provisioning and booting", stages)
	}
	if g.Lease.ID == "" || g.Lease.DeviceID != g.Device.ID || g.Device.Spec.Platform != contract.PlatformIOS || g.Lease.OwnerID == "" {
		t.Fatalf("grant = %+v, want an iOS device with its lease's full record", g)
	}
	rec, err := c.Renew(ctx, g.Lease.ID, 0)
	if err != nil || rec.ID != g.Lease.ID || rec.TTLDeadline < g.Lease.TTLDeadline {
		t.Fatalf("Renew = %+v, %v; want the lease with a later deadline", rec, err)
	}
	ls, err := c.Leases(ctx)
	if err != nil || len(ls) != 1 || ls[0].ID != g.Lease.ID {
		t.Fatalf("Leases = %+v, %v; want the one lease", ls, err)
	}
	rel, err := c.Release(ctx, g.Lease.ID)
	if err != nil || rel != (contract.ReleaseResult{LeaseID: g.Lease.ID, DeviceID: g.Device.ID, Released: true}) {
		t.Fatalf("Release = %+v, %v", rel, err)
	}
	_, err = c.Release(ctx, g.Lease.ID)
	if code(err) != contract.CodeUnknownLease {
		t.Fatalf("a second release = %v, want UNKNOWN_LEASE", err)
	}
}

func containsStage(ss []contract.Stage, s contract.Stage) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// An error answer is the contract error of its body, with its code; a
// server that cannot be reached is DAEMON_CONNECTION_LOST.
func TestErrorsCarryTheirContractCodes(t *testing.T) {
	d, secret := httpDaemon(t)
	ctx := t.Context()
	_, err := newClient(t, apiclient.Options{URL: d.HTTPURL(), Token: "wrong"}).Status(ctx)
	if code(err) != contract.CodeUnauthenticated {
		t.Errorf("a wrong token: %v, want UNAUTHENTICATED", err)
	}
	c := newClient(t, apiclient.Options{URL: d.HTTPURL(), Token: secret})
	_, err = c.RequestLease(ctx, contract.LeaseRequestInput{Platform: "plan9"}, nil)
	if code(err) != contract.CodeBadRequest {
		t.Errorf("a bad platform: %v, want BAD_REQUEST", err)
	}
	_, err = c.Renew(ctx, "nope", 0)
	if code(err) != contract.CodeUnknownLease {
		t.Errorf("renew of no lease: %v, want UNKNOWN_LEASE", err)
	}
	if err := c.Events(ctx, 0, func(contract.Event) {}); code(err) != contract.CodeForbidden {
		t.Errorf("the event stream as an agent: %v, want FORBIDDEN", err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	gone := srv.URL
	srv.Close()
	_, err = newClient(t, apiclient.Options{URL: gone}).Status(ctx)
	if code(err) != contract.CodeDaemonConnectionLost {
		t.Errorf("no server: %v, want DAEMON_CONNECTION_LOST", err)
	}
}

// ParseURL is the one check of a daemon URL.
func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"http://127.0.0.1:8080", true},
		{"https://gw.example:443/", true},
		{"ftp://x", false},
		{"http://", false},
		{"http://u:p@x", false},
		{"http://x/v1", false},
		{"http://x?a=b", false},
		{"x:80", false},
		{"", false},
	} {
		_, err := apiclient.ParseURL(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseURL(%q) = %v, want ok %v", tc.in, err, tc.ok)
		}
		if err != nil && code(err) != contract.CodeUsage {
			t.Errorf("ParseURL(%q) = %v, want USAGE", tc.in, err)
		}
	}
}

// Cancelling the context of a waiting RequestLease withdraws the request:
// nothing is left waiting.
func TestACancelledWaitWithdrawsTheRequest(t *testing.T) {
	d, secret := httpDaemon(t, daemontest.Set("capacity.strategy", "fixed", "capacity.config.maxRunning", "1"))
	c := newClient(t, apiclient.Options{URL: d.HTTPURL(), Token: secret})
	ctx := t.Context()
	// Another agent holds the only device.
	if _, err := d.Dial("other").RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	queued := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		_, err := c.RequestLease(wctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, func(p contract.LeaseProgress) {
			if p.Stage == contract.StageQueued {
				select {
				case queued <- struct{}{}:
				default:
				}
			}
		})
		done <- err
	}()
	<-queued
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RequestLease = %v, want context.Canceled", err)
	}
	st, err := d.Client().Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.QueueDepth != 0 {
		t.Fatalf("queue after the cancel = %d, want 0", st.QueueDepth)
	}
}

// A stream that breaks while the request waits is opened again with
// Last-Event-ID; the wait ends with the grant as if nothing broke.
func TestABrokenRequestStreamResumes(t *testing.T) {
	d, secret := httpDaemon(t, daemontest.DemoTimes(300*time.Millisecond, 300*time.Millisecond))
	target, _ := url.Parse(d.HTTPURL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var lastIDs []string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/events") {
			mu.Lock()
			lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
			first := len(lastIDs) == 1
			mu.Unlock()
			if first {
				w = &cutAfterFirstEvent{ResponseWriter: w}
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	c := newClient(t, apiclient.Options{URL: front.URL, Token: secret})
	g, err := c.RequestLease(t.Context(), contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
	if err != nil {
		t.Fatalf("RequestLease through a broken stream: %v", err)
	}
	if g.Lease.ID == "" {
		t.Fatal("no lease")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lastIDs) < 2 || lastIDs[0] != "" || lastIDs[1] == "" {
		t.Fatalf("stream opened with Last-Event-IDs %q, want a resume naming the last event", lastIDs)
	}
}

// cutAfterFirstEvent passes a stream on until its first event is out, then
// breaks the connection.
type cutAfterFirstEvent struct {
	http.ResponseWriter
	seen []byte
}

func (c *cutAfterFirstEvent) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.seen = append(c.seen, b...)
	// A comment may come first (it sends the headers); the cut comes
	// after the first event whole.
	if i := bytes.Index(c.seen, []byte("data: ")); i >= 0 && bytes.Contains(c.seen[i:], []byte("\n\n")) {
		_ = http.NewResponseController(c.ResponseWriter).Flush()
		panic(http.ErrAbortHandler)
	}
	return n, err
}

func (c *cutAfterFirstEvent) Flush() { _ = http.NewResponseController(c.ResponseWriter).Flush() }

// Files move through the API: a pushed file is pulled back byte for byte,
// a screenshot is a PNG that decodes, and exec on a simulated device is the
// driver's refusal with its code. All of it over https, trusted through
// CAFile (SIMLOCK_CA) alone.
func TestFilesScreenshotAndExecOverTLSWithAPrivateCA(t *testing.T) {
	d, secret := httpDaemon(t)
	target, _ := url.Parse(d.HTTPURL())
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(front.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := newClient(t, apiclient.Options{URL: front.URL, Token: secret}).Status(ctx); code(err) != contract.CodeDaemonConnectionLost {
		t.Fatalf("https without the CA: %v, want DAEMON_CONNECTION_LOST (an unknown authority)", err)
	}
	c := newClient(t, apiclient.Options{URL: front.URL, Token: secret, CAFile: ca})
	g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformAndroid}, nil)
	if err != nil {
		t.Fatalf("RequestLease over https: %v", err)
	}
	id := g.Lease.ID
	data := []byte("hello, device\n")
	size := int64(len(data))
	if _, err := c.PushFile(ctx, contract.FilesPutInput{LeaseID: id, Path: "/sdcard/hello.txt", Size: &size}, bytes.NewReader(data)); err != nil {
		t.Fatalf("PushFile: %v", err)
	}
	var got bytes.Buffer
	if _, n, err := c.PullFile(ctx, contract.FilesGetInput{LeaseID: id, Path: "/sdcard/hello.txt"}, func(contract.TransferInfo) (io.Writer, error) { return &got, nil }); err != nil || n != size || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("PullFile = %q (%d), %v; want what was pushed", got.Bytes(), n, err)
	}
	var shot bytes.Buffer
	info, _, err := c.Screenshot(ctx, contract.ScreenshotInput{LeaseID: id}, func(contract.TransferInfo) (io.Writer, error) { return &shot, nil })
	if err != nil || info.ContentType != "image/png" {
		t.Fatalf("Screenshot = %+v, %v", info, err)
	}
	if _, err := png.Decode(&shot); err != nil {
		t.Fatalf("the screenshot does not decode as a PNG: %v", err)
	}
	_, err = c.Exec(ctx, contract.ExecInput{LeaseID: id, Tool: "adb", Args: []string{"shell", "true"}}, nil)
	if code(err) != contract.CodePassthroughRefused {
		t.Fatalf("exec on a demo device = %v, want PASSTHROUGH_REFUSED", err)
	}
	if _, err := c.Release(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// A server's answer is a claim too: one that never ends is cut at the
// client's bound with BODY_TOO_LARGE, not read into memory without end.
func TestAnEndlessAnswerIsCutAtTheBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"daemon":{"version":"`)
		chunk := strings.Repeat("a", 64<<10)
		for r.Context().Err() == nil {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c, err := apiclient.New(apiclient.Options{URL: srv.URL, Token: "t", MaxAnswerBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(t.Context())
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeBodyTooLarge {
		t.Fatalf("an endless answer: %v, want BODY_TOO_LARGE", err)
	}
}

package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/httpapi"
	"github.com/simlock/simlock/internal/transfer"
)

// device is a fake leased device behind the fake backend: the file
// transfer operations run on a real transfer registry whose sessions keep
// the device's files in memory.
type device struct {
	reg *transfer.Registry

	mu    sync.Mutex
	files map[string][]byte
}

// fileSession is an upload to, or a download from, the fake device.
type fileSession struct {
	d    *device
	path string
	buf  bytes.Buffer
	app  bool
}

func (s *fileSession) Write(_ context.Context, _ int64, b []byte) error {
	s.buf.Write(b)
	return nil
}

func (s *fileSession) Read(_ context.Context, off int64, n int) ([]byte, error) {
	return bytes.Clone(s.buf.Bytes()[off : off+int64(n)]), nil
}

func (s *fileSession) Commit(context.Context, int64) (contract.TransferResult, error) {
	if s.app {
		if !bytes.HasPrefix(s.buf.Bytes(), []byte("PK")) {
			return contract.TransferResult{}, contract.Errorf(contract.CodeInvalidApp, "not an app")
		}
		return contract.TransferResult{App: &contract.InstalledApp{Kind: contract.AppAPK, ID: "com.example.notes"}}, nil
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.d.files[s.path] = bytes.Clone(s.buf.Bytes())
	return contract.TransferResult{Path: s.path}, nil
}

func (s *fileSession) Close() {}

// withDevice scripts the fake backend's file operations onto a device of
// lease lse_1, with an upload limit of max bytes. Lease lse_other is
// another agent's.
func withDevice(h *harness, max int64) *device {
	d := &device{reg: transfer.New(transfer.Options{MaxBytes: max, Idle: time.Minute}), files: map[string][]byte{}}
	h.t.Cleanup(d.reg.Close)
	lease := func(id string) error {
		switch id {
		case "lse_1":
			return nil
		case "lse_other":
			return contract.Errorf(contract.CodeForbidden, "lease %s belongs to another owner", id).With("leaseId", id)
		}
		return contract.Errorf(contract.CodeUnknownLease, "no active lease %s", id).With("leaseId", id)
	}
	open := func(c fakeCall, leaseID string, dir contract.TransferDirection, declared *int64, ct string, s *fileSession) (any, error) {
		if err := lease(leaseID); err != nil {
			return nil, err
		}
		size := int64(s.buf.Len())
		return d.reg.Open(context.Background(), transfer.Open{Owner: c.Token.ID, Lease: leaseID, LeaseID: leaseID, Direction: dir, Declared: declared, ContentType: ct},
			func(context.Context) (transfer.Session, int64, error) { return s, size, nil })
	}
	h.fake.on(contract.OpFilesPut, func(_ context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		in := decodeInput[contract.FilesPutInput](h.t, c)
		return open(c, in.LeaseID, contract.TransferUpload, in.Size, "", &fileSession{d: d, path: in.Path})
	})
	h.fake.on(contract.OpAppsInstall, func(_ context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		in := decodeInput[contract.AppInstallInput](h.t, c)
		return open(c, in.LeaseID, contract.TransferUpload, in.Size, "", &fileSession{d: d, app: true})
	})
	h.fake.on(contract.OpFilesGet, func(_ context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		in := decodeInput[contract.FilesGetInput](h.t, c)
		d.mu.Lock()
		b, ok := d.files[in.Path]
		d.mu.Unlock()
		if err := lease(in.LeaseID); err == nil && !ok {
			return nil, contract.Errorf(contract.CodeDeviceFileMissing, "no file %s on the device", in.Path).With("path", in.Path)
		}
		s := &fileSession{d: d}
		s.buf.Write(b)
		return open(c, in.LeaseID, contract.TransferDownload, nil, "application/octet-stream", s)
	})
	h.fake.on(contract.OpScreenshot, func(_ context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		in := decodeInput[contract.ScreenshotInput](h.t, c)
		s := &fileSession{d: d}
		s.buf.WriteString("\x89PNG\r\n\x1a\nfake")
		return open(c, in.LeaseID, contract.TransferDownload, nil, "image/png", s)
	})
	h.fake.on(contract.OpTransferWrite, func(ctx context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		return d.reg.Write(ctx, c.Token.ID, decodeInput[contract.TransferWriteInput](h.t, c))
	})
	h.fake.on(contract.OpTransferRead, func(ctx context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		return d.reg.Read(ctx, c.Token.ID, decodeInput[contract.TransferReadInput](h.t, c))
	})
	h.fake.on(contract.OpTransferCommit, func(ctx context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		return d.reg.Commit(ctx, c.Token.ID, decodeInput[contract.TransferIDInput](h.t, c).TransferID)
	})
	h.fake.on(contract.OpTransferAbort, func(_ context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		return d.reg.Abort(c.Token.ID, decodeInput[contract.TransferIDInput](h.t, c).TransferID)
	})
	return d
}

func (h *harness) raw(method, path, secret string, body []byte) *http.Response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), method, h.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	return h.send(req)
}

func TestAFileGoesUpAndComesBackByteForByte(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	d := withDevice(h, 8<<20)
	body := make([]byte, 700_001) // three chunks and a bit
	_, _ = rand.Read(body)
	m := readJSON(t, h.raw("PUT", "/v1/leases/lse_1/files?path=/sdcard/a.bin", agentSecret, body), http.StatusOK)
	if m["path"] != "/sdcard/a.bin" || m["bytes"] != float64(len(body)) || m["leaseId"] != "lse_1" {
		t.Fatalf("PUT answered %v", m)
	}
	if got := d.files["/sdcard/a.bin"]; !bytes.Equal(got, body) {
		t.Fatalf("the device holds %d bytes that differ from the %d sent", len(got), len(body))
	}
	if n := len(h.fake.callsOf(contract.OpTransferWrite)); n != 3 {
		t.Errorf("%d writes, want 3 chunks of at most 256 KiB", n)
	}
	if in := decodeInput[contract.FilesPutInput](t, h.fake.callsOf(contract.OpFilesPut)[0]); in.Size == nil || *in.Size != int64(len(body)) {
		t.Errorf("the declared length did not reach the open: %+v", in)
	}

	resp := h.raw("GET", "/v1/leases/lse_1/files?path=/sdcard/a.bin", agentSecret, nil)
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d %v", resp.StatusCode, err)
	}
	if !bytes.Equal(got, body) {
		t.Errorf("GET answered %d bytes that differ from the %d put", len(got), len(body))
	}
	if ct, cl := resp.Header.Get("Content-Type"), resp.Header.Get("Content-Length"); ct != "application/octet-stream" || cl != fmt.Sprint(len(body)) {
		t.Errorf("Content-Type %q, Content-Length %q", ct, cl)
	}
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename=a.bin` {
		t.Errorf("Content-Disposition %q", cd)
	}

	// An empty file is a file.
	readJSON(t, h.raw("PUT", "/v1/leases/lse_1/files?path=/sdcard/empty", agentSecret, nil), http.StatusOK)
	resp = h.raw("GET", "/v1/leases/lse_1/files?path=/sdcard/empty", agentSecret, nil)
	if got, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || len(got) != 0 || resp.Header.Get("Content-Length") != "0" {
		t.Errorf("empty file: %d %q %q", resp.StatusCode, got, resp.Header.Get("Content-Length"))
	}
	if d.reg.Len() != 0 {
		t.Errorf("%d transfers left open", d.reg.Len())
	}
}

func TestAScreenshotIsAPNGAndAnAppInstallSaysWhatItInstalled(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	withDevice(h, 8<<20)
	resp := h.raw("GET", "/v1/leases/lse_1/screenshot", agentSecret, nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("screenshot: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	m := readJSON(t, h.raw("POST", "/v1/leases/lse_1/apps", agentSecret, []byte("PK\x03\x04 an apk")), http.StatusOK)
	app, _ := m["app"].(map[string]any)
	if app["kind"] != "apk" || app["id"] != "com.example.notes" {
		t.Errorf("install answered %v", m)
	}
	readError(t, h.raw("POST", "/v1/leases/lse_1/apps", agentSecret, []byte("not an app")), contract.CodeInvalidApp)
}

func TestAnotherAgentsLeaseIsUnknownOnTheFileRoutes(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	withDevice(h, 8<<20)
	for _, r := range []struct{ method, path string }{
		{"PUT", "/v1/leases/lse_other/files?path=/sdcard/x"},
		{"GET", "/v1/leases/lse_other/files?path=/sdcard/x"},
		{"POST", "/v1/leases/lse_other/apps"},
		{"GET", "/v1/leases/lse_other/screenshot"},
	} {
		e := readError(t, h.raw(r.method, r.path, agentSecret, []byte("x")), contract.CodeUnknownLease)
		if e["leaseId"] != "lse_other" {
			t.Errorf("%s %s: %v", r.method, r.path, e)
		}
	}
	// An operator sees why.
	readError(t, h.raw("GET", "/v1/leases/lse_other/screenshot", operatorSecret, nil), contract.CodeForbidden)
	if n := len(h.fake.callsOf(contract.OpTransferWrite)); n != 0 {
		t.Errorf("%d writes reached the backend", n)
	}
}

func TestFileRoutesRefuseBadQueriesAndMissingFiles(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	withDevice(h, 8<<20)
	e := readError(t, h.raw("PUT", "/v1/leases/lse_1/files?path=/x&dest=/etc/passwd", agentSecret, nil), contract.CodeBadRequest)
	if e["field"] != "dest" {
		t.Errorf("unknown parameter: %v", e)
	}
	readError(t, h.raw("PUT", "/v1/leases/lse_1/files?path=/a&path=/b", agentSecret, nil), contract.CodeBadRequest)
	readError(t, h.raw("GET", "/v1/leases/lse_1/screenshot?path=/x", agentSecret, nil), contract.CodeBadRequest)
	e = readError(t, h.raw("GET", "/v1/leases/lse_1/files?path=/nothing", agentSecret, nil), contract.CodeDeviceFileMissing)
	if e["path"] != "/nothing" {
		t.Errorf("missing file: %v", e)
	}
}

// A declared length over the limit is answered at once: the body is never
// waited for, and nothing is written.
func TestADeclaredLengthOverTheLimitIsRefusedBeforeTheBodyIsRead(t *testing.T) {
	h := newHarness(t, httpapi.Options{MaxUploadBytes: 1000, UploadIdle: time.Minute})
	withDevice(h, 1000)
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(testTimeout))
	// Only the headers: a server that read the body would wait a minute.
	fmt.Fprintf(conn, "PUT /v1/leases/lse_1/files?path=/sdcard/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100000\r\n\r\n", agentSecret)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	defer resp.Body.Close()
	e := readError(t, resp, contract.CodeBodyTooLarge)
	if e["maxBytes"] != float64(1000) {
		t.Errorf("maxBytes %v", e["maxBytes"])
	}
	if n := h.fake.callCount(); n != 0 {
		t.Errorf("the backend was asked %d times for a body over the limit", n)
	}
	// Undeclared, the body is cut where it passes the limit.
	req, _ := http.NewRequestWithContext(t.Context(), "PUT", h.srv.URL+"/v1/leases/lse_1/files?path=/sdcard/y", io.MultiReader(bytes.NewReader(make([]byte, 1001))))
	req.Header.Set("Authorization", "Bearer "+agentSecret)
	req.ContentLength = -1
	readError(t, h.send(req), contract.CodeBodyTooLarge)
}

func TestAStalledUploadIsCutAndItsTransferAborted(t *testing.T) {
	h := newHarness(t, httpapi.Options{UploadIdle: 200 * time.Millisecond})
	d := withDevice(h, 1<<20)
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(testTimeout))
	fmt.Fprintf(conn, "PUT /v1/leases/lse_1/files?path=/sdcard/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\nabc", agentSecret)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a body that stopped arriving: %v", err)
	}
	defer resp.Body.Close()
	e := readError(t, resp, contract.CodeBodyTimeout)
	if e["timeoutMs"] != float64(200) || !resp.Close {
		t.Errorf("timeoutMs %v, close %v", e["timeoutMs"], resp.Close)
	}
	if n := len(h.fake.callsOf(contract.OpTransferAbort)); n != 1 || d.reg.Len() != 0 {
		t.Errorf("%d aborts, %d transfers open; want the transfer aborted", n, d.reg.Len())
	}
	if _, ok := d.files["/sdcard/x"]; ok {
		t.Errorf("a cut upload reached the device")
	}
}

// The chunk answered by the backend is handed on as it is: the route reads
// the transfer's own answer types.
func TestTheTransferCallsAreTheContractsOwn(t *testing.T) {
	h := newHarness(t, httpapi.Options{})
	withDevice(h, 1<<20)
	readJSON(t, h.raw("PUT", "/v1/leases/lse_1/files?path=/sdcard/x", agentSecret, []byte("hello")), http.StatusOK)
	w := decodeInput[contract.TransferWriteInput](t, h.fake.callsOf(contract.OpTransferWrite)[0])
	if string(w.Data) != "hello" || w.Offset != 0 {
		t.Errorf("write %+v", w)
	}
	var in map[string]any
	_ = json.Unmarshal(h.fake.callsOf(contract.OpFilesPut)[0].Input, &in)
	if in["leaseId"] != "lse_1" || in["path"] != "/sdcard/x" {
		t.Errorf("open %v", in)
	}
}

// A download whose client stops taking bytes is cut once a write of it
// waits exec.transferIdleMs, and its transfer aborted: a slow reader
// holds the staged file no longer than that.
func TestADownloadTheClientStopsReadingIsCutAndItsTransferAborted(t *testing.T) {
	h := newHarness(t, httpapi.Options{UploadIdle: 200 * time.Millisecond})
	d := withDevice(h, 64<<20)
	// More than the socket buffers between the server and a client that
	// reads nothing hold.
	d.files["/sdcard/big"] = make([]byte, 16<<20)
	aborted := make(chan struct{}, 1)
	h.fake.on(contract.OpTransferAbort, func(_ context.Context, c fakeCall, _ func(contract.Push)) (any, error) {
		defer func() { aborted <- struct{}{} }()
		return d.reg.Abort(c.Token.ID, decodeInput[contract.TransferIDInput](h.t, c).TransferID)
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/leases/lse_1/files?path=/sdcard/big HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", agentSecret)
	select {
	case <-aborted:
	case <-time.After(testTimeout):
		t.Fatalf("a download nobody reads is still open after %s (%d transfers open)", testTimeout, d.reg.Len())
	}
	if n := d.reg.Len(); n != 0 {
		t.Errorf("%d transfers open after the download was cut", n)
	}
}

// A file transfer is a stream, as an exec is: past the token's
// http.maxStreamsPerToken, a push, a pull, an install and a screenshot are
// each TOO_MANY_STREAMS before anything is asked of the daemon, and a
// place given back serves the next one.
func TestFileTransfersCountAgainstTheStreamCaps(t *testing.T) {
	h := newHarness(t, httpapi.Options{KeepAlive: time.Minute, MaxStreams: 8, MaxStreamsPerToken: 1})
	withDevice(h, 8<<20)
	h.fake.answer(contract.OpLeaseWatch, contract.LeaseWatchResult{}, nil)
	ctx, closeStream := context.WithCancel(t.Context())
	newSSEReader(t, h.send(h.request(ctx, "GET", "/v1/leases/lse_1/events", agentSecret, ""))).expectConnected()
	before := h.fake.callCount()
	for _, c := range []struct {
		method, path string
		body         []byte
	}{
		{"PUT", "/v1/leases/lse_1/files?path=/sdcard/a", []byte("abc")},
		{"GET", "/v1/leases/lse_1/files?path=/sdcard/a", nil},
		{"POST", "/v1/leases/lse_1/apps", []byte("PK\x03\x04 an apk")},
		{"GET", "/v1/leases/lse_1/screenshot", nil},
	} {
		if e := readError(t, h.raw(c.method, c.path, agentSecret, c.body), contract.CodeTooManyStreams); e["maxStreamsPerToken"] != float64(1) {
			t.Errorf("%s %s past the token's cap: %v, want TOO_MANY_STREAMS naming maxStreamsPerToken 1", c.method, c.path, e)
		}
	}
	if n := h.fake.callCount(); n != before {
		t.Errorf("refused transfers asked the daemon %d times, want never", n-before)
	}
	closeStream()
	h.waitEnded("/v1/leases/lse_1/events")
	resp := h.raw("GET", "/v1/leases/lse_1/screenshot", agentSecret, nil)
	if _, _ = io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
		t.Errorf("a screenshot once the stream closed: %d, want 200", resp.StatusCode)
	}
}

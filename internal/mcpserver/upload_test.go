package mcpserver

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/appbundle/apptest"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemontest"
)

// bigAppZip is a zipped .app of bundle id, padded past size bytes with a
// stored (uncompressed) file.
func bigAppZip(t *testing.T, bundleID string, size int) []byte {
	t.Helper()
	small := apptest.AppZip(bundleID, "Big")
	zr, err := zip.NewReader(bytes.NewReader(small), int64(len(small)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		if err := zw.Copy(f); err != nil {
			t.Fatal(err)
		}
	}
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "Big.app/Assets.car", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	pad := make([]byte, size)
	for i := range pad {
		pad[i] = byte(i * 7)
	}
	if _, err := w.Write(pad); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// postUpload POSTs body to an upload URL with no token and returns the
// status and the decoded JSON answer.
func (r *httpRig) postUpload(url string, body []byte) (int, map[string]any) {
	r.t.Helper()
	resp, err := r.hc.Post(url, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// An app over the inline limit reaches the device through a one-time
// upload URL: POSTed with no token, it installs and launches; the same URL
// a second time, or for another lease, is UNAUTHENTICATED and installs
// nothing; another token's session gets no URL for the lease, and a
// revoked token's URL is refused.
func TestAnAppOverTheInlineLimitInstallsThroughAOneTimeUploadURL(t *testing.T) {
	var demos demoDrivers
	r := newHTTPRig(t, demos.option())
	ctx := context.Background()
	tokA, secretA := r.token(contract.TokenAgent)
	_, secretB := r.token(contract.TokenAgent)
	a, b := r.mustSession(secretA), r.mustSession(secretB)
	res, g, err := callTool(ctx, a, "lease_simulator", map[string]any{"platform": "ios"})
	if err != nil || res.IsError {
		t.Fatalf("lease over /mcp: %v %v", err, g)
	}
	leaseID := g["lease"].(map[string]any)["id"].(string)
	devID := g["device"].(map[string]any)["driverDeviceId"].(string)
	ios := demos.of(contract.PlatformIOS)

	// Inline, the app is too large, and the refusal names the way.
	big := bigAppZip(t, "com.example.big", 17<<20)
	out := toolError(t, a, "install_app", map[string]any{"leaseId": leaseID, "contentBase64": b64(big)})
	if msg, _ := out["message"].(string); out["code"] != string(contract.CodeBodyTooLarge) || !strings.Contains(msg, "app_upload_url") {
		t.Errorf("install_app of %d bytes inline = %v, want BODY_TOO_LARGE naming app_upload_url", len(big), clipped(out))
	}

	_, grant := mustTool(t, a, "app_upload_url", map[string]any{"leaseId": leaseID})
	url, _ := grant["uploadUrl"].(string)
	if !strings.HasPrefix(url, r.dt.HTTPURL()+"/v1/leases/"+leaseID+"/apps?upload=") || grant["method"] != "POST" ||
		grant["expiresAt"] == nil || grant["maxBytes"].(float64) < float64(len(big)) {
		t.Fatalf("app_upload_url = %v, want a POST URL of the install route at %s taking %d bytes", grant, r.dt.HTTPURL(), len(big))
	}

	// The URL names its lease: another lease's path is refused, and the
	// URL is still good for its own.
	wrong := strings.Replace(url, "/leases/"+leaseID+"/", "/leases/lse_other/", 1)
	status, refusal := r.postUpload(wrong, apptest.AppZip("com.example.wrong", "Wrong"))
	if status != http.StatusUnauthorized || codeOf(refusal) != contract.CodeUnauthenticated {
		t.Errorf("the URL on another lease = %d %v, want 401 UNAUTHENTICATED", status, refusal)
	}
	// Every refusal is the same answer: it tells nobody which case it was.
	refused := func(what string, status int, body map[string]any) {
		t.Helper()
		if status != http.StatusUnauthorized || !reflect.DeepEqual(body, refusal) {
			t.Errorf("%s = %d %v, want 401 and the same answer as any refused URL (%v)", what, status, body, refusal)
		}
	}
	var installed map[string]any
	status, installed = r.postUpload(url, big)
	if app, _ := installed["app"].(map[string]any); status != http.StatusOK || app["id"] != "com.example.big" {
		t.Fatalf("POST %d bytes to the upload URL = %d %v, want 200 installing com.example.big", len(big), status, installed)
	}
	_, launched := mustTool(t, a, "launch_app", map[string]any{"leaseId": leaseID, "appId": "com.example.big"})
	if launched["appId"] != "com.example.big" {
		t.Errorf("launch_app after the upload = %v, want com.example.big", launched)
	}

	// Once only.
	status, body := r.postUpload(url, apptest.AppZip("com.example.again", "Again"))
	refused("the URL a second time", status, body)
	if out := toolError(t, a, "launch_app", map[string]any{"leaseId": leaseID, "appId": "com.example.again"}); out["code"] != string(contract.CodeAppNotInstalled) {
		t.Errorf("launch an app of a refused upload = %v, want APP_NOT_INSTALLED", out)
	}

	// Another token's session gets no URL for the lease.
	out = toolError(t, b, "app_upload_url", map[string]any{"leaseId": leaseID})
	if code := out["code"]; code != string(contract.CodeForbidden) && code != string(contract.CodeUnknownLease) {
		t.Errorf("another token's app_upload_url on the lease = %v, want FORBIDDEN or UNKNOWN_LEASE", out)
	}

	// A URL whose token was revoked is refused.
	_, grant = mustTool(t, a, "app_upload_url", map[string]any{"leaseId": leaseID})
	var rv contract.TokenRevokeResult
	if err := r.dt.Admin().Call(ctx, contract.OpTokenRevoke, contract.TokenRevokeInput{ID: tokA}, &rv); err != nil || !rv.Revoked {
		t.Fatalf("revoke: %v %v", rv, err)
	}
	status, body = r.postUpload(grant["uploadUrl"].(string), apptest.AppZip("com.example.revoked", "Revoked"))
	refused("a revoked token's URL", status, body)
	status, body = r.postUpload(r.dt.HTTPURL()+"/v1/leases/"+leaseID+"/apps?upload="+strings.Repeat("ab", 32), apptest.AppZip("com.example.guess", "Guess"))
	refused("a guessed URL", status, body)
	if got := ios.Apps(devID); !slices.Equal(got, []string{"com.example.big"}) {
		t.Errorf("the device has %v, want only the app of the one accepted upload", got)
	}
}

func codeOf(body map[string]any) contract.Code {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return contract.Code(c)
}

// On stdio there is no HTTP server to upload to: app_upload_url says to
// give install_app a path or contentBase64.
func TestAppUploadURLOnStdioPointsAtPathAndContent(t *testing.T) {
	dt := daemontest.Start(t, daemontest.DemoTimes(20*time.Millisecond, 20*time.Millisecond))
	cs := stdioSession(t, dt, "agent-upload")
	leaseID, _ := leaseOn(t, cs, contract.PlatformAndroid)
	out := toolError(t, cs, "app_upload_url", map[string]any{"leaseId": leaseID})
	msg, _ := out["message"].(string)
	if out["code"] != string(contract.CodeBadRequest) || !strings.Contains(msg, "path") || !strings.Contains(msg, "contentBase64") {
		t.Errorf("app_upload_url on stdio = %v, want BAD_REQUEST pointing at path and contentBase64", out)
	}
}

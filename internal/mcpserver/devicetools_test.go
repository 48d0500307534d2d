package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/appbundle/apptest"
	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemontest"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// demoDrivers keeps the demo drivers a daemon runs, to read what the
// device tools changed on a device.
type demoDrivers struct {
	mu sync.Mutex
	by map[contract.Platform]*demo.Driver
}

func (d *demoDrivers) option() daemontest.Option {
	return daemontest.WrapDemo(func(dd *demo.Driver) driver.Driver {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.by == nil {
			d.by = map[contract.Platform]*demo.Driver{}
		}
		d.by[dd.Platform()] = dd
		return dd
	})
}

func (d *demoDrivers) of(p contract.Platform) *demo.Driver {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.by[p]
}

// stdioSession serves one MCP session as `simlock mcp` on stdio does
// (LocalFiles on, newline-delimited JSON of up to MaxFrameBytes), over an
// in-memory pipe, acting as principal.
func stdioSession(t *testing.T, dt *daemontest.Daemon, principal string) *mcp.ClientSession {
	t.Helper()
	sc, cc := net.Pipe()
	serverT := &mcp.IOTransport{Reader: sc, Writer: sc, MaxLineLength: MaxFrameBytes}
	clientT := &mcp.IOTransport{Reader: cc, Writer: cc, MaxLineLength: MaxFrameBytes}
	dial := func(ctx context.Context, _ bool) (*client.Client, error) {
		return client.Dial(ctx, dt.Socket(), contract.HelloInput{Principal: principal})
	}
	sess, err := Start(Options{Dial: dial, AgentID: principal, Tick: 50 * time.Millisecond, LocalFiles: true}, serverT)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		sess.Close()
		<-sess.Done()
	})
	return cs
}

// leaseOn leases a device of platform through the session and returns the
// lease id and the driver's device id.
func leaseOn(t *testing.T, cs *mcp.ClientSession, platform contract.Platform) (string, string) {
	t.Helper()
	res, g, err := deviceCall(cs, "lease_simulator", map[string]any{"platform": string(platform)})
	if err != nil || res.IsError {
		t.Fatalf("lease: %v %v", err, g)
	}
	return g["lease"].(map[string]any)["id"].(string), g["device"].(map[string]any)["driverDeviceId"].(string)
}

// deviceCall calls a tool and decodes the JSON of its first text block
// (a screenshot's comes after its image).
func deviceCall(cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any, error) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, nil, err
	}
	var out map[string]any
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			_ = json.Unmarshal([]byte(tc.Text), &out)
			break
		}
	}
	return res, out, nil
}

// mustTool calls a tool that must succeed and returns its result.
func mustTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, out, err := deviceCall(cs, name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s(%s) failed: %v", name, argNames(args), out)
	}
	return res, out
}

// argNames lists the arguments' names, for messages: their values may be
// megabytes of base64.
func argNames(args map[string]any) string {
	var names []string
	for k := range args {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// clipped is an answer with contentBase64 left out, for messages.
func clipped(out map[string]any) map[string]any {
	if _, ok := out["contentBase64"]; ok {
		out = maps.Clone(out)
		out["contentBase64"] = "…"
	}
	return out
}

// toolError calls a tool that must fail and returns its error's JSON.
func toolError(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res, out, err := deviceCall(cs, name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s(%s) = %v, want a tool error", name, argNames(args), clipped(out))
	}
	return out
}

// screenshotPNG calls screenshot and decodes its image block as a PNG.
func screenshotPNG(t *testing.T, cs *mcp.ClientSession, leaseID string) {
	t.Helper()
	res, _ := mustTool(t, cs, "screenshot", map[string]any{"leaseId": leaseID})
	img, ok := res.Content[0].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" {
		t.Fatalf("screenshot's first content = %#v, want an image/png block", res.Content[0])
	}
	if _, err := png.Decode(bytes.NewReader(img.Data)); err != nil {
		t.Fatalf("screenshot does not decode as a PNG: %v", err)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Every device tool over the stdio server: an app launches only once
// install_app installed it (from base64, and from a path on this machine),
// an opened URL shows in the logs, location and appearance reach the
// device, a pushed file pulls back the same, the screenshot is a PNG.
func TestDeviceToolsOverStdioActOnTheLeasedDevice(t *testing.T) {
	var demos demoDrivers
	dt := daemontest.Start(t, daemontest.DemoTimes(20*time.Millisecond, 20*time.Millisecond), demos.option())
	cs := stdioSession(t, dt, "agent-tools")
	leaseID, devID := leaseOn(t, cs, contract.PlatformIOS)
	ios := demos.of(contract.PlatformIOS)

	out := toolError(t, cs, "launch_app", map[string]any{"leaseId": leaseID, "appId": "com.example.demo"})
	if out["code"] != string(contract.CodeAppNotInstalled) {
		t.Errorf("launch before install = %v, want APP_NOT_INSTALLED", out)
	}
	_, inst := mustTool(t, cs, "install_app", map[string]any{"leaseId": leaseID, "contentBase64": b64(apptest.AppZip("com.example.demo", "Demo"))})
	if app, _ := inst["app"].(map[string]any); app["id"] != "com.example.demo" {
		t.Errorf("install_app = %v, want app.id com.example.demo", inst)
	}
	_, launched := mustTool(t, cs, "launch_app", map[string]any{"leaseId": leaseID, "appId": "com.example.demo", "args": []string{"-flag"}})
	if launched["appId"] != "com.example.demo" || !slices.Contains(ios.Tools(devID).Running, "com.example.demo") {
		t.Errorf("launch_app = %v, running %v; want com.example.demo running", launched, ios.Tools(devID).Running)
	}
	mustTool(t, cs, "terminate_app", map[string]any{"leaseId": leaseID, "appId": "com.example.demo"})
	if slices.Contains(ios.Tools(devID).Running, "com.example.demo") {
		t.Errorf("after terminate_app, running %v", ios.Tools(devID).Running)
	}

	// A path on the machine the stdio server runs on is read by it.
	app := filepath.Join(t.TempDir(), "Other.zip")
	if err := os.WriteFile(app, apptest.AppZip("com.example.other", "Other"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustTool(t, cs, "install_app", map[string]any{"leaseId": leaseID, "path": app})
	if got := ios.Apps(devID); !slices.Contains(got, "com.example.other") {
		t.Errorf("after install_app by path the device has %v, want com.example.other", got)
	}

	mustTool(t, cs, "open_url", map[string]any{"leaseId": leaseID, "url": "myapp://item/1"})
	res, _ := mustTool(t, cs, "device_logs", map[string]any{"leaseId": leaseID, "lines": 50})
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "opened myapp://item/1") {
		t.Errorf("device_logs after open_url:\n%s\nwant a line saying it opened myapp://item/1", text)
	}

	mustTool(t, cs, "set_location", map[string]any{"leaseId": leaseID, "latitude": 48.8584, "longitude": 2.2945})
	mustTool(t, cs, "set_appearance", map[string]any{"leaseId": leaseID, "appearance": "dark"})
	st := ios.Tools(devID)
	if st.Location == nil || *st.Location != [2]float64{48.8584, 2.2945} || st.Appearance != contract.AppearanceDark {
		t.Errorf("device state %+v, want location 48.8584,2.2945 and dark", st)
	}

	content := []byte("hello from the agent\x00\xff")
	_, pushed := mustTool(t, cs, "push_file", map[string]any{"leaseId": leaseID, "devicePath": "/Documents/note.bin", "contentBase64": b64(content)})
	if pushed["bytes"] != float64(len(content)) {
		t.Errorf("push_file = %v, want %d bytes", pushed, len(content))
	}
	_, pulled := mustTool(t, cs, "pull_file", map[string]any{"leaseId": leaseID, "devicePath": "/Documents/note.bin"})
	if got, _ := base64.StdEncoding.DecodeString(pulled["contentBase64"].(string)); !bytes.Equal(got, content) {
		t.Errorf("pull_file = %v (%q), want the pushed bytes back", clipped(pulled), got)
	}
	screenshotPNG(t, cs, leaseID)
}

// Inputs are checked before anything reaches the daemon: each tool needs
// its leaseId; inline content over 16 MiB is BODY_TOO_LARGE naming the
// limit and the other ways; unknown fields and bad values are BAD_REQUEST.
func TestDeviceToolInputsAreCheckedBeforeTheDaemon(t *testing.T) {
	dt := daemontest.Start(t, daemontest.DemoTimes(20*time.Millisecond, 20*time.Millisecond))
	cs := stdioSession(t, dt, "agent-checks")
	leaseID, _ := leaseOn(t, cs, contract.PlatformAndroid)

	small := b64([]byte("x"))
	for tool, args := range map[string]map[string]any{
		"screenshot":     {},
		"install_app":    {"contentBase64": small},
		"launch_app":     {"appId": "com.example.app"},
		"terminate_app":  {"appId": "com.example.app"},
		"open_url":       {"url": "https://example.com"},
		"device_logs":    {},
		"set_location":   {"latitude": 1.0, "longitude": 2.0},
		"set_appearance": {"appearance": "light"},
		"push_file":      {"devicePath": "/sdcard/Download/x", "contentBase64": small},
		"pull_file":      {"devicePath": "/sdcard/Download/x"},
	} {
		if out := toolError(t, cs, tool, args); out["code"] != string(contract.CodeBadRequest) || out["field"] != "leaseId" {
			t.Errorf("%s without leaseId = %v, want BAD_REQUEST on leaseId", tool, out)
		}
	}

	big := b64(make([]byte, maxInlineBytes+1))
	for tool, args := range map[string]map[string]any{
		"install_app": {"leaseId": leaseID, "contentBase64": big},
		"push_file":   {"leaseId": leaseID, "devicePath": "/sdcard/Download/big", "contentBase64": big},
	} {
		out := toolError(t, cs, tool, args)
		msg, _ := out["message"].(string)
		if out["code"] != string(contract.CodeBodyTooLarge) || out["maxBytes"] != float64(maxInlineBytes) || !strings.Contains(msg, "16 MiB") || !strings.Contains(msg, "simlock install") {
			t.Errorf("%s with 16 MiB + 1 = %v, want BODY_TOO_LARGE naming 16 MiB and the other ways", tool, out)
		}
	}

	for _, c := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"install_app", map[string]any{"leaseId": leaseID}, "contentBase64"},
		{"install_app", map[string]any{"leaseId": leaseID, "contentBase64": small, "path": "/tmp/x.apk"}, "path"},
		{"install_app", map[string]any{"leaseId": leaseID, "contentBase64": "not base64!"}, "contentBase64"},
		{"set_appearance", map[string]any{"leaseId": leaseID, "appearance": "sepia"}, "appearance"},
		{"set_location", map[string]any{"leaseId": leaseID, "latitude": 91.0, "longitude": 0.0}, "latitude"},
		{"device_logs", map[string]any{"leaseId": leaseID, "sinceSeconds": 86401}, "sinceSeconds"},
		{"device_logs", map[string]any{"leaseId": leaseID, "lines": 5001}, "lines"},
		{"open_url", map[string]any{"leaseId": leaseID, "url": "no scheme"}, "url"},
		{"push_file", map[string]any{"leaseId": leaseID, "devicePath": "/sdcard/../etc/x", "contentBase64": small}, "devicePath"},
		{"pull_file", map[string]any{"leaseId": leaseID, "devicePath": "relative"}, "devicePath"},
		{"launch_app", map[string]any{"leaseId": leaseID, "appId": "com.example.app", "extra": 1}, "extra"},
	} {
		if out := toolError(t, cs, c.tool, c.args); out["code"] != string(contract.CodeBadRequest) || out["field"] != c.field {
			t.Errorf("%s(%s) = %v, want BAD_REQUEST on %s", c.tool, argNames(c.args), out, c.field)
		}
	}
}

// A file on the device larger than what a call answers inline is refused
// by pull_file before its bytes move, naming the limit.
func TestPullFileRefusesMoreThan16MiB(t *testing.T) {
	dt := daemontest.Start(t, daemontest.DemoTimes(20*time.Millisecond, 20*time.Millisecond))
	cs := stdioSession(t, dt, "agent-pull")
	leaseID, _ := leaseOn(t, cs, contract.PlatformAndroid)
	// The same agent puts a large file there through the daemon's own
	// stream, which has no inline bound.
	c := dt.Dial("agent-pull")
	size := int64(maxInlineBytes + 1)
	if _, err := c.PushFile(context.Background(), contract.FilesPutInput{LeaseID: leaseID, Path: "/sdcard/Download/big", Size: &size}, bytes.NewReader(make([]byte, size))); err != nil {
		t.Fatal(err)
	}
	out := toolError(t, cs, "pull_file", map[string]any{"leaseId": leaseID, "devicePath": "/sdcard/Download/big"})
	if msg, _ := out["message"].(string); out["code"] != string(contract.CodeBodyTooLarge) || !strings.Contains(msg, "16 MiB") {
		t.Errorf("pull_file of 16 MiB + 1 = %v, want BODY_TOO_LARGE naming 16 MiB", out)
	}
}

// Over /mcp the tools act as the token: the holder's screenshot is a PNG
// and its launch works; another token's calls on that lease are refused
// and change nothing on the device; a path is refused, since /mcp never
// reaches a file of the daemon's machine.
func TestDeviceToolsOverHTTPAreTheTokensAndNeverReadAHostPath(t *testing.T) {
	var demos demoDrivers
	r := newHTTPRig(t, demos.option())
	_, secretA := r.token(contract.TokenAgent)
	_, secretB := r.token(contract.TokenAgent)
	a, b := r.mustSession(secretA), r.mustSession(secretB)
	leaseID, devID := leaseOn(t, a, contract.PlatformAndroid)
	android := demos.of(contract.PlatformAndroid)

	screenshotPNG(t, a, leaseID)
	mustTool(t, a, "install_app", map[string]any{"leaseId": leaseID, "contentBase64": b64(apptest.APK("com.example.mine"))})
	mustTool(t, a, "launch_app", map[string]any{"leaseId": leaseID, "appId": "com.example.mine"})
	before := android.Tools(devID)
	appsBefore := android.Apps(devID)

	for tool, args := range map[string]map[string]any{
		"screenshot":     {},
		"install_app":    {"contentBase64": b64(apptest.APK("com.example.theirs"))},
		"terminate_app":  {"appId": "com.example.mine"},
		"open_url":       {"url": "https://example.com"},
		"device_logs":    {},
		"set_location":   {"latitude": 1.0, "longitude": 2.0},
		"set_appearance": {"appearance": "dark"},
		"push_file":      {"devicePath": "/sdcard/Download/x", "contentBase64": b64([]byte("x"))},
		"pull_file":      {"devicePath": "/sdcard/Download/x"},
	} {
		args["leaseId"] = leaseID
		out := toolError(t, b, tool, args)
		if code := out["code"]; code != string(contract.CodeForbidden) && code != string(contract.CodeUnknownLease) {
			t.Errorf("another token's %s on the lease = %v, want FORBIDDEN or UNKNOWN_LEASE", tool, out)
		}
	}
	after := android.Tools(devID)
	if !slices.Equal(after.Running, before.Running) || !slices.Equal(after.URLs, before.URLs) || after.Location != nil || after.Appearance != before.Appearance ||
		!slices.Equal(android.Apps(devID), appsBefore) {
		t.Errorf("another token's calls changed the device: %+v apps %v, was %+v apps %v", after, android.Apps(devID), before, appsBefore)
	}
	out := toolError(t, a, "pull_file", map[string]any{"leaseId": leaseID, "devicePath": "/sdcard/Download/x"})
	if out["code"] != string(contract.CodeDeviceFileMissing) {
		t.Errorf("after another token's push_file the holder pulls %v, want DEVICE_FILE_NOT_FOUND", out)
	}

	app := filepath.Join(t.TempDir(), "host.apk")
	if err := os.WriteFile(app, apptest.APK("com.example.host"), 0o600); err != nil {
		t.Fatal(err)
	}
	out = toolError(t, a, "install_app", map[string]any{"leaseId": leaseID, "path": app})
	if msg, _ := out["message"].(string); out["code"] != string(contract.CodeForbidden) || out["field"] != "path" || !strings.Contains(msg, "contentBase64") {
		t.Errorf("install_app with a path over /mcp = %v, want FORBIDDEN on path pointing at contentBase64", out)
	}
	if got := android.Apps(devID); slices.Contains(got, "com.example.host") {
		t.Errorf("a path over /mcp installed the host's app: %v", got)
	}
}

// Every device tool is listed with a strict schema that requires leaseId
// and a description.
func TestDeviceToolsHaveStrictSchemasRequiringTheLease(t *testing.T) {
	dt := daemontest.Start(t, daemontest.DemoTimes(20*time.Millisecond, 20*time.Millisecond))
	cs := stdioSession(t, dt, "agent-schemas")
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"app_upload_url", "device_logs", "install_app", "launch_app", "open_url", "pull_file", "push_file", "screenshot", "set_appearance", "set_location", "terminate_app"}
	seen := map[string]bool{}
	for _, tool := range tools.Tools {
		if !slices.Contains(want, tool.Name) {
			continue
		}
		seen[tool.Name] = true
		raw, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Type                 string
			AdditionalProperties *bool
			Required             []string
			Properties           map[string]struct{ Enum []string }
		}
		_ = json.Unmarshal(raw, &s)
		if s.Type != "object" || s.AdditionalProperties == nil || *s.AdditionalProperties || !slices.Contains(s.Required, "leaseId") {
			t.Errorf("%s schema %s: want a strict object requiring leaseId", tool.Name, raw)
		}
		if p, ok := s.Properties["appearance"]; ok && !slices.Equal(p.Enum, []string{"light", "dark"}) {
			t.Errorf("%s schema: appearance enum %v, want light and dark", tool.Name, p.Enum)
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
	}
	for _, name := range want {
		if !seen[name] {
			t.Errorf("tool %s is not listed", name)
		}
	}
}

func TestDecodeInline(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		code contract.Code
		n    int
	}{
		{"empty", "", contract.CodeBadRequest, 0},
		{"not base64", "%%%", contract.CodeBadRequest, 0},
		{"unpadded", "eA", contract.CodeBadRequest, 0},
		{"one byte", "eA==", "", 1},
		{"the limit", b64(make([]byte, maxInlineBytes)), "", maxInlineBytes},
		{"one past", b64(make([]byte, maxInlineBytes+1)), contract.CodeBodyTooLarge, 0},
		{"far past, not decoded", strings.Repeat("A", 4*maxInlineBytes), contract.CodeBodyTooLarge, 0},
	} {
		b, err := decodeInline("contentBase64", c.in)
		if err != nil {
			if got := contract.AsError(err).Code; got != c.code {
				t.Errorf("%s: code %s, want %q", c.name, got, c.code)
			}
			continue
		}
		if c.code != "" || len(b) != c.n {
			t.Errorf("%s: %d bytes, no error; want %d bytes, code %q", c.name, len(b), c.n, c.code)
		}
	}
}

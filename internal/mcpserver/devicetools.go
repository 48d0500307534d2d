package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"os"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/contract"
)

// The device tools act on a leased device: screenshot, install and launch
// an app, open a URL, read the log, move files, set the location and the
// appearance. Each names its lease (leaseId, required: no tool guesses a
// "current device"), and each is the daemon operation the CLI's command of
// the same job calls, with the contract's inputs and checks; the daemon
// checks the lease is the caller's.
//
// Bytes travel inline, base64 in the call or its answer, so they are
// bounded by maxInlineBytes. The one exception is install_app's path on
// the stdio server: a file of the machine `simlock mcp` runs on, which that
// process reads itself. Over /mcp a path is refused: a remote surface never
// reaches a host path.

// maxInlineBytes bounds the bytes one device tool call carries inline (an
// app or file sent, a file or screenshot answered), decoded.
const maxInlineBytes = 16 << 20

// MaxFrameBytes is the largest JSON-RPC message the stdio server reads:
// room for maxInlineBytes in base64 with the rest of its call (the SDK's
// default of 16 MiB would end the session on a call carrying the largest
// inline app). /mcp bounds its request bodies alike.
const MaxFrameBytes = 32 << 20

// largerWays is what an agent with more than maxInlineBytes to move is told
// to use instead.
const largerWays = "the simlock CLI (simlock install, push, pull) or the HTTP file routes (POST /v1/leases/{id}/apps, PUT and GET /v1/leases/{id}/files) stream any size"

// tooLarge is the refusal of an inline payload over maxInlineBytes.
func tooLarge(field string, n int64) error {
	return contract.Errorf(contract.CodeBodyTooLarge, "%s: %d bytes is more than the %d MiB a tool call carries inline; %s",
		field, n, maxInlineBytes>>20, largerWays).With("field", field).With("maxBytes", maxInlineBytes)
}

// decodeInline decodes a base64 payload of at most maxInlineBytes, its
// size checked before any byte is decoded.
func decodeInline(field, s string) ([]byte, error) {
	if s == "" {
		return nil, contract.BadRequest(field, "is required: the content, base64-encoded")
	}
	if n := int64(base64.StdEncoding.DecodedLen(len(s))); n > maxInlineBytes+2 {
		return nil, tooLarge(field, n)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, contract.BadRequest(field, "must be standard base64 (with padding): %v", err)
	}
	if len(b) > maxInlineBytes {
		return nil, tooLarge(field, int64(len(b)))
	}
	return b, nil
}

// checkLeaseID checks a device tool's required lease id.
func checkLeaseID(id string) error {
	return (&contract.LeaseIDInput{LeaseID: id}).Validate()
}

type screenshotInput struct {
	LeaseID string `json:"leaseId" jsonschema:"the lease whose device's screen to capture (lease.id from the grant)"`
}

func (in *screenshotInput) Validate() error {
	return (&contract.ScreenshotInput{LeaseID: in.LeaseID}).Validate()
}

type launchInput struct {
	LeaseID string   `json:"leaseId" jsonschema:"the lease whose device runs the app (lease.id from the grant)"`
	AppID   string   `json:"appId" jsonschema:"the installed app: its bundle id on iOS, its package name on Android (com.example.app)"`
	Args    []string `json:"args,omitempty" jsonschema:"iOS only: arguments passed to the app (at most 32); an Android app is started by its launcher activity, which takes none"`
}

func (in *launchInput) contract() contract.AppLaunchInput {
	return contract.AppLaunchInput{LeaseRef: contract.LeaseRef{LeaseID: in.LeaseID}, AppID: in.AppID, Args: in.Args}
}

func (in *launchInput) Validate() error { c := in.contract(); return c.Validate() }

type appIDInput struct {
	LeaseID string `json:"leaseId" jsonschema:"the lease whose device runs the app (lease.id from the grant)"`
	AppID   string `json:"appId" jsonschema:"the app: its bundle id on iOS, its package name on Android (com.example.app)"`
}

func (in *appIDInput) contract() contract.AppTerminateInput {
	return contract.AppTerminateInput{LeaseRef: contract.LeaseRef{LeaseID: in.LeaseID}, AppID: in.AppID}
}

func (in *appIDInput) Validate() error { c := in.contract(); return c.Validate() }

type openURLInput struct {
	LeaseID string `json:"leaseId" jsonschema:"the lease whose device opens the URL (lease.id from the grant)"`
	URL     string `json:"url" jsonschema:"the URL with its scheme: a deep link (myapp://item/1) or a web page (https://example.com); no white space (percent-encode it)"`
}

func (in *openURLInput) contract() contract.OpenURLInput {
	return contract.OpenURLInput{LeaseRef: contract.LeaseRef{LeaseID: in.LeaseID}, URL: in.URL}
}

func (in *openURLInput) Validate() error { c := in.contract(); return c.Validate() }

type logsInput struct {
	LeaseID      string `json:"leaseId" jsonschema:"the lease whose device's log to read (lease.id from the grant)"`
	Lines        int    `json:"lines,omitempty" jsonschema:"how many of the last lines (default 200, at most 5000)"`
	SinceSeconds int64  `json:"sinceSeconds,omitempty" jsonschema:"only the lines of this many seconds before now (at most 86400); whole minutes on iOS"`
	Process      string `json:"process,omitempty" jsonschema:"only the lines of this process (iOS) or log tag (Android)"`
}

func (in *logsInput) contract() contract.DeviceLogsInput {
	return contract.DeviceLogsInput{LeaseRef: contract.LeaseRef{LeaseID: in.LeaseID}, Lines: in.Lines, SinceMs: in.SinceSeconds * 1000, Process: in.Process}
}

func (in *logsInput) Validate() error {
	// Checked in seconds before the contract checks the milliseconds, so
	// a huge value cannot overflow into an accepted one.
	if in.SinceSeconds < 0 || in.SinceSeconds > int64(contract.MaxLogSince.Seconds()) {
		return contract.BadRequest("sinceSeconds", "must be between 1 and %d (24 h), got %d", int64(contract.MaxLogSince.Seconds()), in.SinceSeconds)
	}
	c := in.contract()
	return c.Validate()
}

type locationInput struct {
	LeaseID   string   `json:"leaseId" jsonschema:"the lease whose device's location to set (lease.id from the grant)"`
	Latitude  *float64 `json:"latitude" jsonschema:"degrees north, -90 to 90"`
	Longitude *float64 `json:"longitude" jsonschema:"degrees east, -180 to 180"`
}

func (in *locationInput) contract() contract.LocationInput {
	return contract.LocationInput{LeaseRef: contract.LeaseRef{LeaseID: in.LeaseID}, Latitude: in.Latitude, Longitude: in.Longitude}
}

func (in *locationInput) Validate() error { c := in.contract(); return c.Validate() }

type appearanceInput struct {
	LeaseID    string              `json:"leaseId" jsonschema:"the lease whose device to switch (lease.id from the grant)"`
	Appearance contract.Appearance `json:"appearance" jsonschema:"light or dark"`
}

func (in *appearanceInput) contract() contract.AppearanceInput {
	return contract.AppearanceInput{LeaseRef: contract.LeaseRef{LeaseID: in.LeaseID}, Appearance: in.Appearance}
}

func (in *appearanceInput) Validate() error { c := in.contract(); return c.Validate() }

type installInput struct {
	LeaseID       string `json:"leaseId" jsonschema:"the lease whose device gets the app (lease.id from the grant)"`
	ContentBase64 string `json:"contentBase64,omitempty" jsonschema:"the app, base64-encoded: an .apk (Android), an .ipa or a zipped .app (iOS), at most 16 MiB decoded; give this or path"`
	Path          string `json:"path,omitempty" jsonschema:"only when this server runs on your machine (simlock mcp on stdio): the app file's path there, read by this server, any size; refused over HTTP"`

	// data is ContentBase64 decoded by Validate.
	data []byte
}

func (in *installInput) Validate() error {
	if err := checkLeaseID(in.LeaseID); err != nil {
		return err
	}
	switch {
	case in.ContentBase64 != "" && in.Path != "":
		return contract.BadRequest("path", "give contentBase64 or path, not both")
	case in.Path != "":
		if strings.ContainsRune(in.Path, 0) {
			return contract.BadRequest("path", "must not contain NUL")
		}
		return nil
	case in.ContentBase64 == "":
		return contract.BadRequest("contentBase64", "is required: the app (.apk, .ipa or zipped .app), base64-encoded, at most %d MiB", maxInlineBytes>>20)
	}
	b, err := decodeInline("contentBase64", in.ContentBase64)
	in.data = b
	return err
}

type pushInput struct {
	LeaseID       string `json:"leaseId" jsonschema:"the lease whose device gets the file (lease.id from the grant)"`
	DevicePath    string `json:"devicePath" jsonschema:"where the file goes on the device: an absolute path (/sdcard/Download/x.txt on Android; on iOS a path inside the device's data directory, such as /Media/DCIM/x.jpg), or @<bundle id>/Documents/x.json inside an installed iOS app's container"`
	ContentBase64 string `json:"contentBase64" jsonschema:"the file's content, base64-encoded, at most 16 MiB decoded"`

	data []byte
}

func (in *pushInput) Validate() error {
	if err := checkLeaseID(in.LeaseID); err != nil {
		return err
	}
	if err := contract.CheckDevicePath("devicePath", in.DevicePath); err != nil {
		return err
	}
	b, err := decodeInline("contentBase64", in.ContentBase64)
	in.data = b
	return err
}

type pullInput struct {
	LeaseID    string `json:"leaseId" jsonschema:"the lease whose device has the file (lease.id from the grant)"`
	DevicePath string `json:"devicePath" jsonschema:"the file on the device: an absolute path, or @<bundle id>/… inside an installed iOS app's container"`
}

func (in *pullInput) Validate() error {
	if err := checkLeaseID(in.LeaseID); err != nil {
		return err
	}
	return contract.CheckDevicePath("devicePath", in.DevicePath)
}

// pullResult answers pull_file.
type pullResult struct {
	LeaseID       string `json:"leaseId"`
	DevicePath    string `json:"devicePath"`
	Bytes         int64  `json:"bytes"`
	ContentType   string `json:"contentType,omitempty"`
	ContentBase64 string `json:"contentBase64"`
}

// deviceSchema is inputSchema with the device tools' enums and bounds.
func deviceSchema[T any]() *jsonschema.Schema {
	s := inputSchema[T]()
	bound := func(name, typ string, lo, hi float64) {
		if p, ok := s.Properties[name]; ok {
			p.Types, p.Type = nil, typ
			p.Minimum, p.Maximum = &lo, &hi
		}
	}
	bound("lines", "integer", 1, contract.MaxLogLines)
	bound("sinceSeconds", "integer", 1, contract.MaxLogSince.Seconds())
	bound("latitude", "number", -90, 90)
	bound("longitude", "number", -180, 180)
	if p, ok := s.Properties["appearance"]; ok {
		p.Enum = []any{string(contract.AppearanceLight), string(contract.AppearanceDark)}
	}
	if p, ok := s.Properties["args"]; ok {
		p.MaxItems = ptr(contract.MaxLaunchArgs)
	}
	return s
}

// handleContent is handle for a tool that answers with its own content (an
// image, lines of text) rather than one JSON value: the same decoding,
// checks and error results.
func handleContent[In any, PIn interface {
	*In
	contract.Validator
}](f func(ctx context.Context, in *In) (*mcp.CallToolResult, error)) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var out *mcp.CallToolResult
		res, err := handle[In, PIn](func(ctx context.Context, _ *mcp.CallToolRequest, in *In) (any, error) {
			r, err := f(ctx, in)
			out = r
			return nil, err
		})(ctx, req)
		if err != nil || res.IsError {
			return res, err
		}
		return out, nil
	}
}

// registerDeviceTools adds the device tools.
func (s *server) registerDeviceTools(srv *mcp.Server) {
	srv.AddTool(&mcp.Tool{
		Name:        "screenshot",
		Title:       "Screenshot of your leased device",
		Description: "Captures the screen of a device you lease. Answers with a PNG image (and a line giving its size in pixels and bytes).",
		InputSchema: deviceSchema[screenshotInput](),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, handleContent(s.screenshot))
	srv.AddTool(&mcp.Tool{
		Name:  "install_app",
		Title: "Install an app on your leased device",
		Description: "Installs an app on a device you lease: an .apk on Android, an .ipa or a zipped .app (a simulator build) on iOS, sent as contentBase64 (at most 16 MiB). " +
			"Answers with what was installed: its kind and app id (bundle id or package name), the id launch_app takes.",
		InputSchema: deviceSchema[installInput](),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)},
	}, s.pointToUploadURL(handle(s.installApp)))
	s.registerUploadTool(srv)
	srv.AddTool(&mcp.Tool{
		Name:        "launch_app",
		Title:       "Launch an app on your leased device",
		Description: "Starts an installed app on a device you lease, by bundle id (iOS) or package name (Android). Answers with the app id and, on iOS, its process id; an app the device does not have is APP_NOT_INSTALLED.",
		InputSchema: deviceSchema[launchInput](),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)},
	}, handle(s.launchApp))
	srv.AddTool(&mcp.Tool{
		Name:        "terminate_app",
		Title:       "Stop an app on your leased device",
		Description: "Stops an app on a device you lease, by bundle id (iOS) or package name (Android); one that is not running is no error. Answers with the app id.",
		InputSchema: deviceSchema[appIDInput](),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true},
	}, handle(s.terminateApp))
	srv.AddTool(&mcp.Tool{
		Name:        "open_url",
		Title:       "Open a URL or deep link on your leased device",
		Description: "Opens a URL on a device you lease with the app that handles it: a deep link (myapp://item/1) or a web page. Answers with the URL opened.",
		InputSchema: deviceSchema[openURLInput](),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)},
	}, handle(s.openURL))
	srv.AddTool(&mcp.Tool{
		Name:  "device_logs",
		Title: "Read your leased device's log",
		Description: "Reads the last lines of a device's log you lease, optionally of the last sinceSeconds and of one process (iOS) or tag (Android). " +
			"Answers with the lines as text, oldest first, at most 1 MiB (older lines are left out past it, and the answer says so).",
		InputSchema: deviceSchema[logsInput](),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, handleContent(s.deviceLogs))
	srv.AddTool(&mcp.Tool{
		Name:        "set_location",
		Title:       "Set your leased device's location",
		Description: "Sets the location a device you lease reports, in degrees. Answers with the latitude and longitude set.",
		InputSchema: deviceSchema[locationInput](),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true},
	}, handle(s.setLocation))
	srv.AddTool(&mcp.Tool{
		Name:        "set_appearance",
		Title:       "Switch your leased device to light or dark mode",
		Description: "Switches a device you lease to light or dark mode. Answers with the appearance set.",
		InputSchema: deviceSchema[appearanceInput](),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true},
	}, handle(s.setAppearance))
	srv.AddTool(&mcp.Tool{
		Name:        "push_file",
		Title:       "Put a file on your leased device",
		Description: "Writes a file to a path on a device you lease, from contentBase64 (at most 16 MiB). Answers with the device path written and its size in bytes.",
		InputSchema: deviceSchema[pushInput](),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, handle(s.pushFile))
	srv.AddTool(&mcp.Tool{
		Name:        "pull_file",
		Title:       "Read a file from your leased device",
		Description: "Reads a file from a device you lease. Answers with JSON text giving its size, its media type and its content as contentBase64; a file over 16 MiB is BODY_TOO_LARGE.",
		InputSchema: deviceSchema[pullInput](),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, handleContent(s.pullFile))
}

// boundedBuffer keeps at most max bytes; a write past them fails with the
// field's BODY_TOO_LARGE.
type boundedBuffer struct {
	field string
	max   int64
	buf   bytes.Buffer
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if n := int64(b.buf.Len() + len(p)); n > b.max {
		return 0, tooLarge(b.field, n)
	}
	return b.buf.Write(p)
}

// receiveInline is the sink of a download answered inline: refused when
// its announced size is over maxInlineBytes, before any byte moves.
func (b *boundedBuffer) sink(info contract.TransferInfo) (io.Writer, error) {
	if info.Size != nil && *info.Size > b.max {
		return nil, tooLarge(b.field, *info.Size)
	}
	return b, nil
}

func (s *server) screenshot(ctx context.Context, in *screenshotInput) (*mcp.CallToolResult, error) {
	c, err := s.daemon(ctx, true)
	if err != nil {
		return nil, err
	}
	out := &boundedBuffer{field: "screenshot", max: maxInlineBytes}
	if _, _, err := c.Screenshot(ctx, contract.ScreenshotInput{LeaseID: in.LeaseID}, out.sink); err != nil {
		return nil, err
	}
	// The bytes come from the device's machine: a claim, passed on only
	// when they are the PNG the tool says it answers.
	b := out.buf.Bytes()
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, contract.Errorf(contract.CodeInternal, "the device's screenshot is not a PNG: %v", err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.ImageContent{MIMEType: "image/png", Data: b},
		&mcp.TextContent{Text: fmt.Sprintf("Screenshot of lease %s: %d×%d pixels, %d bytes of PNG.", in.LeaseID, cfg.Width, cfg.Height, len(b))},
	}}, nil
}

func (s *server) installApp(ctx context.Context, _ *mcp.CallToolRequest, in *installInput) (any, error) {
	var r io.Reader = bytes.NewReader(in.data)
	size := int64(len(in.data))
	if in.Path != "" {
		if !s.opts.LocalFiles {
			return nil, contract.Errorf(contract.CodeForbidden,
				"path: this MCP server is reached over the network, and a remote caller may not name a file of the machine it runs on; send the app as contentBase64 (at most %d MiB), or for a larger one use %s",
				maxInlineBytes>>20, largerWays).With("field", "path")
		}
		f, n, err := openApp(in.Path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, size = f, n
	}
	c, err := s.daemon(ctx, true)
	if err != nil {
		return nil, err
	}
	res, err := c.InstallApp(ctx, contract.AppInstallInput{LeaseID: in.LeaseID, Size: &size}, r)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// openApp opens the app file path names on this machine (stdio only): a
// regular file, whose size the upload declares.
func openApp(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, contract.BadRequest("path", "cannot open the app: %v", err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, contract.BadRequest("path", "must be a regular file: an .apk, an .ipa or a zipped .app")
	}
	return f, fi.Size(), nil
}

func (s *server) launchApp(ctx context.Context, _ *mcp.CallToolRequest, in *launchInput) (any, error) {
	var out contract.AppLaunchResult
	x := in.contract()
	if err := s.deviceTool(ctx, contract.OpAppLaunch, &x, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *server) terminateApp(ctx context.Context, _ *mcp.CallToolRequest, in *appIDInput) (any, error) {
	var out contract.AppTerminateResult
	x := in.contract()
	if err := s.deviceTool(ctx, contract.OpAppTerminate, &x, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *server) openURL(ctx context.Context, _ *mcp.CallToolRequest, in *openURLInput) (any, error) {
	var out contract.OpenURLResult
	x := in.contract()
	if err := s.deviceTool(ctx, contract.OpOpenURL, &x, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *server) setLocation(ctx context.Context, _ *mcp.CallToolRequest, in *locationInput) (any, error) {
	var out contract.LocationResult
	x := in.contract()
	if err := s.deviceTool(ctx, contract.OpSetLocation, &x, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *server) setAppearance(ctx context.Context, _ *mcp.CallToolRequest, in *appearanceInput) (any, error) {
	var out contract.AppearanceResult
	x := in.contract()
	if err := s.deviceTool(ctx, contract.OpSetAppearance, &x, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// deviceTool calls one device tool operation of the daemon.
func (s *server) deviceTool(ctx context.Context, op contract.Op, in contract.DeviceToolInput, out any) error {
	c, err := s.daemon(ctx, true)
	if err != nil {
		return err
	}
	return c.DeviceTool(ctx, op, in, out)
}

func (s *server) deviceLogs(ctx context.Context, in *logsInput) (*mcp.CallToolResult, error) {
	var logs contract.DeviceLogs
	x := in.contract()
	if err := s.deviceTool(ctx, contract.OpDeviceLogs, &x, &logs); err != nil {
		return nil, err
	}
	var text strings.Builder
	if logs.Truncated {
		text.WriteString("(older lines left out: the answer is bounded at 1 MiB)\n")
	}
	for _, l := range logs.Lines {
		text.WriteString(l)
		text.WriteByte('\n')
	}
	if len(logs.Lines) == 0 {
		text.WriteString("(no log lines)\n")
	}
	structured, err := json.Marshal(logs)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}, StructuredContent: json.RawMessage(structured)}, nil
}

func (s *server) pushFile(ctx context.Context, _ *mcp.CallToolRequest, in *pushInput) (any, error) {
	c, err := s.daemon(ctx, true)
	if err != nil {
		return nil, err
	}
	size := int64(len(in.data))
	return c.PushFile(ctx, contract.FilesPutInput{LeaseID: in.LeaseID, Path: in.DevicePath, Size: &size}, bytes.NewReader(in.data))
}

func (s *server) pullFile(ctx context.Context, in *pullInput) (*mcp.CallToolResult, error) {
	c, err := s.daemon(ctx, true)
	if err != nil {
		return nil, err
	}
	out := &boundedBuffer{field: "devicePath", max: maxInlineBytes}
	info, n, err := c.PullFile(ctx, contract.FilesGetInput{LeaseID: in.LeaseID, Path: in.DevicePath}, out.sink)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(pullResult{LeaseID: in.LeaseID, DevicePath: in.DevicePath, Bytes: n, ContentType: info.ContentType,
		ContentBase64: base64.StdEncoding.EncodeToString(out.buf.Bytes())})
	if err != nil {
		return nil, err
	}
	// The JSON is answered once, as text: a copy as structured content
	// too would double a message that may already be 22 MB.
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
}

package contract

import (
	"regexp"
	"strings"
)

// File transfer: files and apps move into and out of a leased device through
// the daemon, never through a host path the caller names. A transfer is
// opened by one of the operations below, which checks the lease as
// device.exec does; its bytes then move in chunks of at most MaxTransferChunk
// (transfer.write up, transfer.read down), each call answered before the
// next is sent, so one chunk is in flight at a time however many hops (a
// gateway, its worker) lie between. An upload ends with transfer.commit,
// which puts the file on the device or installs the app; a download ends with
// the read that reaches its end. transfer.abort ends either early. A
// transfer belongs to the principal that opened it and to its lease: any
// other caller gets UNKNOWN_TRANSFER, and the lease's end aborts it.
const (
	// OpFilesPut opens an upload of a file to a path on the device.
	OpFilesPut Op = "device.files.put"
	// OpFilesGet stages a file of the device and opens its download.
	OpFilesGet Op = "device.files.get"
	// OpAppsInstall opens an upload of an app (.apk, .ipa, or a zipped
	// .app) that transfer.commit installs.
	OpAppsInstall Op = "device.apps.install"
	// OpScreenshot takes a PNG of the device's screen and opens its
	// download.
	OpScreenshot     Op = "device.screenshot"
	OpTransferWrite  Op = "transfer.write"
	OpTransferRead   Op = "transfer.read"
	OpTransferCommit Op = "transfer.commit"
	OpTransferAbort  Op = "transfer.abort"
)

// The file transfer's error codes.
const (
	// CodeUnknownTransfer: no open transfer of the caller's has that id
	// (never opened, ended, abandoned past its idle bound, or its lease
	// ended).
	CodeUnknownTransfer Code = "UNKNOWN_TRANSFER"
	// CodeDevicePathRefused: a device path the platform's model refuses
	// (outside the device's tree once symlinks are followed, or one of
	// simlock's own files).
	CodeDevicePathRefused Code = "DEVICE_PATH_REFUSED"
	// CodeDeviceFileMissing: a pull of a path the device does not have.
	CodeDeviceFileMissing Code = "DEVICE_FILE_NOT_FOUND"
	// CodeInvalidApp: an app upload that is not an app of the lease's
	// platform.
	CodeInvalidApp Code = "INVALID_APP"
	// CodeAppInstallFailed: the platform refused to install the app.
	CodeAppInstallFailed Code = "APP_INSTALL_FAILED"
)

// Bounds of a transfer's calls.
const (
	// MaxTransferChunk is the most bytes one transfer.write carries or
	// one transfer.read returns: in base64 with its frame, well inside
	// MaxFrameLen on every hop.
	MaxTransferChunk = 256 << 10
	// MaxDevicePathLen bounds a device path.
	MaxDevicePathLen = 1024
)

// A device path names a file on the leased device. Two forms:
//
//   - "/a/b": an absolute path. On Android it is the path in the guest
//     (/sdcard/Download/x.txt, /data/local/tmp/x). On iOS, whose simulators
//     have no file transfer of their own, it is a path inside the device's
//     data directory (/Media/DCIM/…, /Library/…), which the daemon reaches
//     on the host without ever leaving it.
//   - "@<bundle id>/a/b" (iOS only): a path inside that installed app's data
//     container (@com.example.app/Documents/x.json).
//
// Segments are never empty, "." or "..", and a path holds no control
// character: what leaves the device's own tree is refused before any driver
// sees it, and drivers confine what remains (symlinks included).
var bundleIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]*$`)

// CheckDevicePath checks a device path's form (see above). field names the
// input field in the error.
func CheckDevicePath(field, p string) error {
	if p == "" {
		return BadRequest(field, "is required: a path on the device, such as /sdcard/Download/file.txt")
	}
	if len(p) > MaxDevicePathLen {
		return BadRequest(field, "must be at most %d bytes, got %d", MaxDevicePathLen, len(p))
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return BadRequest(field, "must not contain control characters or NUL")
		}
	}
	rest, ok := strings.CutPrefix(p, "/")
	if !ok {
		app, inApp, found := strings.Cut(strings.TrimPrefix(p, "@"), "/")
		if !strings.HasPrefix(p, "@") || !found || !bundleIDPattern.MatchString(app) || len(app) > MaxNameLen {
			return BadRequest(field, "must be an absolute path (/…), or @<bundle id>/… inside an app's container on iOS; got %q", clip(p))
		}
		rest = inApp
	}
	if rest == "" {
		return BadRequest(field, "names a directory, not a file: %q", clip(p))
	}
	for _, seg := range strings.Split(rest, "/") {
		switch seg {
		case "":
			return BadRequest(field, "must not have an empty segment (// or a trailing /): %q", clip(p))
		case ".", "..":
			return BadRequest(field, "must not have . or .. segments: %q", clip(p))
		}
	}
	return nil
}

// SplitAppPath splits an "@<bundle id>/rest" device path into the bundle id
// and the path inside the app's container ("rest", without a leading
// slash); ok is false for an absolute path. The path is assumed checked.
func SplitAppPath(p string) (bundleID, inside string, ok bool) {
	if !strings.HasPrefix(p, "@") {
		return "", "", false
	}
	bundleID, inside, _ = strings.Cut(p[1:], "/")
	return bundleID, inside, true
}

// checkSize checks a declared upload size (nil when the caller does not
// know it).
func checkSize(size *int64) error {
	if size != nil && *size < 0 {
		return BadRequest("size", "must not be negative, got %d", *size)
	}
	return nil
}

// FilesPutInput opens an upload of a file to Path on the lease's device.
type FilesPutInput struct {
	LeaseID string `json:"leaseId"`
	Path    string `json:"path"`
	// Size is the file's length when the caller knows it: over
	// exec.maxUploadBytes it is refused (BODY_TOO_LARGE) before any byte
	// moves, and the commit checks that exactly this many arrived.
	Size *int64 `json:"size,omitempty"`
	// RequesterID, as device.exec's: an admin acting on someone else's
	// lease names its requester.
	RequesterID string `json:"requesterId,omitempty"`
}

// Validate checks the input's fields.
func (in *FilesPutInput) Validate() error {
	if err := checkID("leaseId", in.LeaseID, true); err != nil {
		return err
	}
	if err := CheckDevicePath("path", in.Path); err != nil {
		return err
	}
	if err := checkSize(in.Size); err != nil {
		return err
	}
	return checkID("requesterId", in.RequesterID, false)
}

// FilesGetInput stages Path of the lease's device for download.
type FilesGetInput struct {
	LeaseID     string `json:"leaseId"`
	Path        string `json:"path"`
	RequesterID string `json:"requesterId,omitempty"`
}

// Validate checks the input's fields.
func (in *FilesGetInput) Validate() error {
	if err := checkID("leaseId", in.LeaseID, true); err != nil {
		return err
	}
	if err := CheckDevicePath("path", in.Path); err != nil {
		return err
	}
	return checkID("requesterId", in.RequesterID, false)
}

// AppInstallInput opens an upload of an app for the lease's device: an
// .apk on Android, an .ipa or a zipped .app on iOS, told apart by content.
type AppInstallInput struct {
	LeaseID     string `json:"leaseId"`
	Size        *int64 `json:"size,omitempty"`
	RequesterID string `json:"requesterId,omitempty"`
}

// Validate checks the input's fields.
func (in *AppInstallInput) Validate() error {
	if err := checkID("leaseId", in.LeaseID, true); err != nil {
		return err
	}
	if err := checkSize(in.Size); err != nil {
		return err
	}
	return checkID("requesterId", in.RequesterID, false)
}

// ScreenshotInput takes a PNG of the lease's device's screen.
type ScreenshotInput struct {
	LeaseID     string `json:"leaseId"`
	RequesterID string `json:"requesterId,omitempty"`
}

// Validate checks the input's fields.
func (in *ScreenshotInput) Validate() error {
	if err := checkID("leaseId", in.LeaseID, true); err != nil {
		return err
	}
	return checkID("requesterId", in.RequesterID, false)
}

// TransferDirection is which way a transfer's bytes move.
type TransferDirection string

// The directions.
const (
	TransferUpload   TransferDirection = "upload"
	TransferDownload TransferDirection = "download"
)

// TransferInfo answers the operations that open a transfer.
type TransferInfo struct {
	TransferID string            `json:"transferId"`
	Direction  TransferDirection `json:"direction"`
	LeaseID    string            `json:"leaseId"`
	// Size is a download's length (an upload's declared one, when given).
	Size *int64 `json:"size,omitempty"`
	// MaxBytes is the most an upload may carry (exec.maxUploadBytes).
	MaxBytes int64 `json:"maxBytes"`
	// ChunkBytes is the most one write carries or one read returns.
	ChunkBytes int `json:"chunkBytes"`
	// IdleMs is how long the transfer may go without a call before it is
	// abandoned and its staged bytes deleted (exec.transferIdleMs).
	IdleMs int64 `json:"idleMs"`
	// ContentType is a download's media type.
	ContentType string `json:"contentType,omitempty"`
}

// MaxTransferIDLen bounds a transfer id.
const MaxTransferIDLen = 128

// TransferIDInput names one transfer.
type TransferIDInput struct {
	TransferID string `json:"transferId"`
}

// Validate checks the input's fields.
func (in *TransferIDInput) Validate() error { return checkTransferID(in.TransferID) }

func checkTransferID(id string) error {
	if len(id) > MaxTransferIDLen {
		return BadRequest("transferId", "must be at most %d characters, got %d", MaxTransferIDLen, len(id))
	}
	return checkID("transferId", id, true)
}

// TransferWriteInput carries the next chunk of an upload. Offset must be
// the number of bytes the transfer has received so far: a caller that lost
// an answer asks again from there (the refusal names received).
type TransferWriteInput struct {
	TransferID string `json:"transferId"`
	Offset     int64  `json:"offset"`
	// Data is base64 in JSON.
	Data []byte `json:"data"`
}

// Validate checks the input's fields.
func (in *TransferWriteInput) Validate() error {
	if err := checkTransferID(in.TransferID); err != nil {
		return err
	}
	if in.Offset < 0 {
		return BadRequest("offset", "must not be negative, got %d", in.Offset)
	}
	if len(in.Data) > MaxTransferChunk {
		return BadRequest("data", "must be at most %d bytes per write, got %d", MaxTransferChunk, len(in.Data))
	}
	return nil
}

// TransferWriteResult answers transfer.write.
type TransferWriteResult struct {
	// Received is the bytes the transfer holds now: the next write's
	// offset.
	Received int64 `json:"received"`
}

// TransferReadInput asks for up to Max bytes of a download from Offset.
type TransferReadInput struct {
	TransferID string `json:"transferId"`
	Offset     int64  `json:"offset"`
	// Max caps the chunk; 0 means MaxTransferChunk.
	Max int `json:"max,omitempty"`
}

// Validate checks the input's fields.
func (in *TransferReadInput) Validate() error {
	if err := checkTransferID(in.TransferID); err != nil {
		return err
	}
	if in.Offset < 0 {
		return BadRequest("offset", "must not be negative, got %d", in.Offset)
	}
	if in.Max < 0 || in.Max > MaxTransferChunk {
		return BadRequest("max", "must be between 0 and %d, got %d", MaxTransferChunk, in.Max)
	}
	return nil
}

// TransferChunk answers transfer.read: the bytes at the offset asked for,
// and whether they reach the end, which also ends the transfer.
type TransferChunk struct {
	Data []byte `json:"data"`
	EOF  bool   `json:"eof,omitempty"`
}

// AppKind is what an app upload turned out to be.
type AppKind string

// The app kinds.
const (
	AppAPK AppKind = "apk"
	AppIPA AppKind = "ipa"
	// AppZip is a zip holding an .app bundle (an iOS simulator build).
	AppZip AppKind = "app"
)

// InstalledApp is what device.apps.install put on the device.
type InstalledApp struct {
	Kind AppKind `json:"kind"`
	// ID is the bundle id (iOS) or package name (Android), when the app
	// says it.
	ID string `json:"id,omitempty"`
	// Name is the .app bundle's directory name (iOS).
	Name string `json:"name,omitempty"`
}

// TransferResult answers transfer.commit.
type TransferResult struct {
	LeaseID string `json:"leaseId"`
	// Path is where device.files.put wrote the file.
	Path string `json:"path,omitempty"`
	// Bytes is how many bytes the upload carried.
	Bytes int64 `json:"bytes"`
	// App is what device.apps.install installed.
	App *InstalledApp `json:"app,omitempty"`
}

// TransferAbortResult answers transfer.abort.
type TransferAbortResult struct {
	Aborted bool `json:"aborted"`
}

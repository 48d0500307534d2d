package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/simlock/simlock/internal/appbundle"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/transfer"
)

// File transfer on a worker. A transfer's bytes are staged in
// $SIMLOCK_HOME/staging/<lease>/<transfer>/, private to the daemon's user:
// an upload is written there chunk by chunk and handed to the driver at its
// commit; a download is staged there by the driver at its open and read
// back chunk by chunk. The daemon opens no host path a caller named, on any
// surface: the CLI reads and writes the caller's own files itself.
//
// A transfer touches the device only in the call that opens a download and
// in an upload's commit; each checks first that its lease is still the one
// it was opened on. The lease's end (release, expiry, device lost) aborts
// the lease's transfers and waits for such a call in flight, as a lease-end
// participant, before the device is cleaned; a daemon's start deletes
// whatever the last run left staged.

// stagingName is the staging directory under SIMLOCK_HOME.
const stagingName = "staging"

func (d *Daemon) stagingDir() string { return filepath.Join(d.opts.Home, stagingName) }

// newTransfers makes the daemon's transfer registry from its config, and
// deletes what an earlier run left staged: no transfer outlives the daemon
// that held it.
func (d *Daemon) newTransfers() *transfer.Registry {
	if err := os.RemoveAll(d.stagingDir()); err != nil {
		d.log.Warn("could not delete the last run's staged transfers", "err", err)
	}
	cfg := d.opts.Config
	return transfer.New(transfer.Options{
		MaxBytes: cfg.Int("exec.maxUploadBytes"),
		Idle:     time.Duration(cfg.Int("exec.transferIdleMs")) * time.Millisecond,
	})
}

// leaseStaging is the staging directory of the lease whose unique key is
// key (two owners may each have chosen one id): a hash, since a key may
// hold characters a file name may not.
func (d *Daemon) leaseStaging(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(d.stagingDir(), hex.EncodeToString(sum[:12]))
}

// onDevice is what a transfer needs of its lease: the lease as it was when
// the transfer opened (its transfers and staging are keyed by its unique
// key, which the lease's end names), its device as the driver knows it, and
// the driver.
type onDevice struct {
	d     *Daemon
	lease contract.LeaseRecord
	// leaseID is the id the caller named the lease by.
	leaseID  string
	platform contract.Platform
	dev      driver.Device
	files    driver.Files
}

// fileLease authorizes c on lease leaseID as device.exec does and finds
// its driver's Files.
func (d *Daemon) fileLease(c leasing.Caller, leaseID, requesterID string) (*onDevice, error) {
	l, err := d.leaseToRun(c, leaseID, requesterID)
	if err != nil {
		return nil, err
	}
	p := l.Device.Spec.Platform
	files, ok := d.opts.Drivers[p].(driver.Files)
	if !ok {
		return nil, contract.Errorf(contract.CodeNoDriver, "the %s driver cannot move files to its devices", p).With("platform", p)
	}
	return &onDevice{d: d, lease: l.Lease, leaseID: leaseID, platform: p,
		dev: driver.Device{ID: l.Device.DriverDeviceID, Address: l.Device.Address}, files: files}, nil
}

// stillLeased checks, before the device is touched, that the lease is the
// one the transfer opened on: not ended, and not another lease that took
// its id since. Checked inside a transfer's call, after the registry
// counted it in flight, so a lease that ends after the check waits for it.
func (o *onDevice) stillLeased() error {
	l, err := o.d.engine.Get(leasing.Caller{Admin: true}, contract.LeaseIDInput{LeaseID: o.lease.UniqueKey()})
	if err != nil || l.Lease.GrantedAt != o.lease.GrantedAt {
		return contract.Errorf(contract.CodeUnknownLease, "lease %s has ended", o.leaseID).With("leaseId", o.leaseID)
	}
	return nil
}

// open registers a transfer of o's lease whose staging directory start
// fills.
func (o *onDevice) open(ctx context.Context, owner string, dir contract.TransferDirection, declared *int64, contentType string,
	start func(ctx context.Context, stage string) (transfer.Session, int64, error)) (contract.TransferInfo, error) {
	return o.d.transfers.Open(ctx, transfer.Open{Owner: owner, Lease: o.lease.UniqueKey(), LeaseID: o.leaseID, Direction: dir, Declared: declared, ContentType: contentType},
		func(ctx context.Context) (transfer.Session, int64, error) {
			if err := o.stillLeased(); err != nil {
				return nil, 0, err
			}
			parent := o.d.leaseStaging(o.lease.UniqueKey())
			if err := os.MkdirAll(parent, 0o700); err != nil {
				return nil, 0, contract.Errorf(contract.CodeInternal, "create the staging directory: %v", err)
			}
			stage, err := os.MkdirTemp(parent, "tr-")
			if err != nil {
				return nil, 0, contract.Errorf(contract.CodeInternal, "create the staging directory: %v", err)
			}
			s, size, err := start(ctx, stage)
			if err != nil {
				_ = os.RemoveAll(stage)
				return nil, 0, err
			}
			return s, size, nil
		})
}

func (d *Daemon) openFilesPut(ctx context.Context, c leasing.Caller, in contract.FilesPutInput) (contract.TransferInfo, error) {
	o, err := d.fileLease(c, in.LeaseID, in.RequesterID)
	if err != nil {
		return contract.TransferInfo{}, err
	}
	return o.open(ctx, c.Principal, contract.TransferUpload, in.Size, "", func(_ context.Context, stage string) (transfer.Session, int64, error) {
		return newUpload(stage, func(ctx context.Context, path string) (contract.TransferResult, error) {
			if err := o.stillLeased(); err != nil {
				return contract.TransferResult{}, err
			}
			if err := o.files.PushFile(ctx, o.dev, path, in.Path); err != nil {
				return contract.TransferResult{}, driver.ContractError(err)
			}
			return contract.TransferResult{Path: in.Path}, nil
		})
	})
}

func (d *Daemon) openAppInstall(ctx context.Context, c leasing.Caller, in contract.AppInstallInput) (contract.TransferInfo, error) {
	o, err := d.fileLease(c, in.LeaseID, in.RequesterID)
	if err != nil {
		return contract.TransferInfo{}, err
	}
	limit := d.opts.Config.Int("exec.maxUploadBytes")
	return o.open(ctx, c.Principal, contract.TransferUpload, in.Size, "", func(_ context.Context, stage string) (transfer.Session, int64, error) {
		return newUpload(stage, func(ctx context.Context, path string) (contract.TransferResult, error) {
			app, err := appbundle.Inspect(path)
			if err != nil {
				return contract.TransferResult{}, invalidApp(err)
			}
			if err := appFits(app, o.platform); err != nil {
				return contract.TransferResult{}, err
			}
			scratch, err := os.MkdirTemp(stage, "app-")
			if err != nil {
				return contract.TransferResult{}, contract.Errorf(contract.CodeInternal, "create a scratch directory: %v", err)
			}
			if err := o.stillLeased(); err != nil {
				return contract.TransferResult{}, err
			}
			got, err := o.files.InstallApp(ctx, o.dev, driver.AppUpload{App: app, Path: path, Scratch: scratch, MaxBytes: limit})
			if err != nil {
				return contract.TransferResult{}, driver.ContractError(err)
			}
			return contract.TransferResult{App: &got}, nil
		})
	})
}

// invalidApp is INVALID_APP for what appbundle refused, INTERNAL for a
// staged file it could not read.
func invalidApp(err error) error {
	var inv *appbundle.InvalidError
	if errors.As(err, &inv) {
		return contract.Errorf(contract.CodeInvalidApp, "the upload is %v", err)
	}
	return contract.Errorf(contract.CodeInternal, "read the staged app: %v", err)
}

// appFits refuses an app of the other platform.
func appFits(app appbundle.App, p contract.Platform) error {
	want := contract.PlatformIOS
	if app.Kind == contract.AppAPK {
		want = contract.PlatformAndroid
	}
	if want != p {
		return contract.Errorf(contract.CodeInvalidApp, "the upload is an %s, an %s app, and the lease's device is %s", app.Kind, want, p).
			With("kind", app.Kind).With("platform", p)
	}
	return nil
}

func (d *Daemon) openFilesGet(ctx context.Context, c leasing.Caller, in contract.FilesGetInput) (contract.TransferInfo, error) {
	o, err := d.fileLease(c, in.LeaseID, in.RequesterID)
	if err != nil {
		return contract.TransferInfo{}, err
	}
	limit := d.opts.Config.Int("exec.maxUploadBytes")
	return o.open(ctx, c.Principal, contract.TransferDownload, nil, "application/octet-stream", func(ctx context.Context, stage string) (transfer.Session, int64, error) {
		dst := filepath.Join(stage, "download")
		if err := o.files.PullFile(ctx, o.dev, in.Path, dst, limit); err != nil {
			return nil, 0, driver.ContractError(err)
		}
		return newDownload(stage, dst)
	})
}

func (d *Daemon) openScreenshot(ctx context.Context, c leasing.Caller, in contract.ScreenshotInput) (contract.TransferInfo, error) {
	o, err := d.fileLease(c, in.LeaseID, in.RequesterID)
	if err != nil {
		return contract.TransferInfo{}, err
	}
	return o.open(ctx, c.Principal, contract.TransferDownload, nil, "image/png", func(ctx context.Context, stage string) (transfer.Session, int64, error) {
		dst := filepath.Join(stage, "screenshot.png")
		if err := o.files.Screenshot(ctx, o.dev, dst); err != nil {
			return nil, 0, driver.ContractError(err)
		}
		return newDownload(stage, dst)
	})
}

// upload is an upload staged in a file of its own directory.
type upload struct {
	dir    string
	f      *os.File
	commit func(ctx context.Context, path string) (contract.TransferResult, error)
}

func newUpload(dir string, commit func(ctx context.Context, path string) (contract.TransferResult, error)) (transfer.Session, int64, error) {
	f, err := os.OpenFile(filepath.Join(dir, "upload"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, 0, contract.Errorf(contract.CodeInternal, "create the staging file: %v", err)
	}
	return &upload{dir: dir, f: f, commit: commit}, 0, nil
}

func (u *upload) Write(_ context.Context, _ int64, data []byte) error {
	if _, err := u.f.Write(data); err != nil {
		return contract.Errorf(contract.CodeInternal, "stage the upload: %v", err)
	}
	return nil
}

func (u *upload) Read(context.Context, int64, int) ([]byte, error) {
	return nil, errors.New("an upload is not read")
}

func (u *upload) Commit(ctx context.Context, _ int64) (contract.TransferResult, error) {
	if err := u.f.Close(); err != nil {
		return contract.TransferResult{}, contract.Errorf(contract.CodeInternal, "stage the upload: %v", err)
	}
	return u.commit(ctx, u.f.Name())
}

func (u *upload) Close() {
	_ = u.f.Close()
	_ = os.RemoveAll(u.dir)
}

// download is a file staged for reading back.
type download struct {
	dir string
	f   *os.File
}

func newDownload(dir, path string) (transfer.Session, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, contract.Errorf(contract.CodeInternal, "open the staged file: %v", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, contract.Errorf(contract.CodeInternal, "stat the staged file: %v", err)
	}
	return &download{dir: dir, f: f}, st.Size(), nil
}

func (dl *download) Write(context.Context, int64, []byte) error {
	return errors.New("a download is not written")
}

func (dl *download) Read(_ context.Context, offset int64, n int) ([]byte, error) {
	b := make([]byte, n)
	got, err := dl.f.ReadAt(b, offset)
	if err != nil && !(errors.Is(err, io.EOF) && got == n) {
		return nil, contract.Errorf(contract.CodeInternal, "read the staged file: %v", err)
	}
	return b[:got], nil
}

func (dl *download) Commit(context.Context, int64) (contract.TransferResult, error) {
	return contract.TransferResult{}, errors.New("a download is not committed")
}

func (dl *download) Close() {
	_ = dl.f.Close()
	_ = os.RemoveAll(dl.dir)
}

// stagingParticipant ends a lease's transfers when the lease ends, before
// its device is cleaned, and deletes the lease's staging directory.
type stagingParticipant struct{ d *Daemon }

var _ leasing.LeaseEndIdler = stagingParticipant{}

// IdleFor says a lease with no transfer in the table and no staging
// directory left gives the participant nothing to do.
func (p stagingParticipant) IdleFor(ended leasing.EndedLease) bool {
	if p.d.transfers.HasLease(ended.LeaseID) {
		return false
	}
	_, err := os.Lstat(p.d.leaseStaging(ended.LeaseID))
	return errors.Is(err, os.ErrNotExist)
}

func (p stagingParticipant) LeaseEnded(ctx context.Context, ended leasing.EndedLease) error {
	p.d.transfers.EndLease(ctx, ended.LeaseID)
	// Each transfer's session removed its own directory; what is left is
	// the lease's, empty unless a lease that took the same id since has
	// staged there.
	err := os.Remove(p.d.leaseStaging(ended.LeaseID))
	if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("delete the lease's staging directory: %w", err)
	}
	return nil
}

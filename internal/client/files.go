package client

import (
	"context"
	"io"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/transfer"
)

// PushFile sends r's bytes to in.Path on the lease's device (in.Size, when
// set, must be their count) and returns what the daemon put there. The
// bytes move in chunks, one in flight at a time; a failure aborts the
// transfer.
func (c *Client) PushFile(ctx context.Context, in contract.FilesPutInput, r io.Reader) (contract.TransferResult, error) {
	return transfer.Send(ctx, c.Call, contract.OpFilesPut, in, r)
}

// InstallApp sends the app r holds (an .apk, an .ipa or a zipped .app) to
// the lease's device and installs it.
func (c *Client) InstallApp(ctx context.Context, in contract.AppInstallInput, r io.Reader) (contract.TransferResult, error) {
	return transfer.Send(ctx, c.Call, contract.OpAppsInstall, in, r)
}

// PullFile copies in.Path of the lease's device to the writer sink returns
// once it knows the file's size; it returns what was opened and the bytes
// written.
func (c *Client) PullFile(ctx context.Context, in contract.FilesGetInput, sink func(contract.TransferInfo) (io.Writer, error)) (contract.TransferInfo, int64, error) {
	return transfer.Receive(ctx, c.Call, contract.OpFilesGet, in, sink)
}

// Screenshot copies a PNG of the lease's device's screen to the writer
// sink returns.
func (c *Client) Screenshot(ctx context.Context, in contract.ScreenshotInput, sink func(contract.TransferInfo) (io.Writer, error)) (contract.TransferInfo, int64, error) {
	return transfer.Receive(ctx, c.Call, contract.OpScreenshot, in, sink)
}

package apiclient

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"github.com/simlock/simlock/internal/contract"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// PushFile is PUT /v1/leases/{id}/files: r's bytes go to in.Path on the
// lease's device. in.Size, when set, is sent as the body's length, which
// lets the server refuse a file over its limit before any byte moves.
func (c *Client) PushFile(ctx context.Context, in contract.FilesPutInput, r io.Reader) (contract.TransferResult, error) {
	return c.upload(ctx, http.MethodPut, "/v1/leases/"+esc(in.LeaseID)+"/files",
		fileQuery(in.Path, in.RequesterID), in.Size, r)
}

// InstallApp is POST /v1/leases/{id}/apps: r is an .apk, .ipa or zipped .app.
func (c *Client) InstallApp(ctx context.Context, in contract.AppInstallInput, r io.Reader) (contract.TransferResult, error) {
	return c.upload(ctx, http.MethodPost, "/v1/leases/"+esc(in.LeaseID)+"/apps",
		fileQuery("", in.RequesterID), in.Size, r)
}

// PullFile is GET /v1/leases/{id}/files: sink is told what comes before
// the first byte and returns where the bytes go; the info and the count of
// bytes written are returned.
func (c *Client) PullFile(ctx context.Context, in contract.FilesGetInput, sink func(contract.TransferInfo) (io.Writer, error)) (contract.TransferInfo, int64, error) {
	return c.download(ctx, "/v1/leases/"+esc(in.LeaseID)+"/files", fileQuery(in.Path, in.RequesterID), in.LeaseID, sink)
}

// Screenshot is GET /v1/leases/{id}/screenshot: a PNG, through sink as
// PullFile's.
func (c *Client) Screenshot(ctx context.Context, in contract.ScreenshotInput, sink func(contract.TransferInfo) (io.Writer, error)) (contract.TransferInfo, int64, error) {
	return c.download(ctx, "/v1/leases/"+esc(in.LeaseID)+"/screenshot", fileQuery("", in.RequesterID), in.LeaseID, sink)
}

func fileQuery(path, requester string) url.Values {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	if requester != "" {
		q.Set("requesterId", requester)
	}
	return q
}

func (c *Client) upload(ctx context.Context, method, path string, q url.Values, size *int64, r io.Reader) (contract.TransferResult, error) {
	req, err := c.request(ctx, method, path, q, r)
	if err != nil {
		return contract.TransferResult{}, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if size != nil {
		req.ContentLength = *size
	}
	var res contract.TransferResult
	return res, c.decode(req, &res, http.StatusOK)
}

func (c *Client) download(ctx context.Context, path string, q url.Values, leaseID string, sink func(contract.TransferInfo) (io.Writer, error)) (contract.TransferInfo, int64, error) {
	req, err := c.request(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return contract.TransferInfo{}, 0, err
	}
	res, err := c.send(req, http.StatusOK)
	if err != nil {
		return contract.TransferInfo{}, 0, err
	}
	defer res.Body.Close()
	info := contract.TransferInfo{Direction: contract.TransferDownload, LeaseID: leaseID}
	info.ContentType, _, _ = mime.ParseMediaType(res.Header.Get("Content-Type"))
	if n, err := strconv.ParseInt(res.Header.Get("Content-Length"), 10, 64); err == nil {
		info.Size = &n
	}
	w, err := sink(info)
	if err != nil {
		return info, 0, err
	}
	n, err := io.Copy(w, res.Body)
	if err != nil {
		if ctx.Err() != nil {
			return info, n, ctx.Err()
		}
		return info, n, contract.Errorf(contract.CodeDaemonConnectionLost, "the download broke off after %d bytes: %v", n, err)
	}
	if info.Size != nil && n != *info.Size {
		return info, n, contract.Errorf(contract.CodeDaemonConnectionLost, "the download ended after %d of %d bytes", n, *info.Size)
	}
	return info, n, nil
}

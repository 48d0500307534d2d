package cli

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// retryCmd retries what failed: a quarantined device (dev_…) now, instead
// of at its next backoff, or a failed lease request (req_…), made again as
// it was stored, as a new request for the same requester.
func retryCmd(env Env) *cobra.Command {
	admin := session{principal: "simlock-cli", admin: true, autostart: true}
	return &cobra.Command{
		Use:   "retry <deviceId|requestId>",
		Short: "Retry a quarantined device now, or make a failed lease request again",
		Long: `retry takes a device id (dev_…) or a lease request id (req_…).

A quarantined device is cleaned again now, instead of at its next backoff;
the answer is the device as the retry found it, and its end shows as
device.quarantine-recovered or device.quarantine-retry-failed. A failed
lease request is made again as it was stored (its spec, TTL, timeout and
download permission, not today's defaults), as a new request for the same
requester, which does not wait: follow it by id. Anything that has not
failed is NOT_RETRYABLE; the original stays as it was.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			switch {
			case strings.HasPrefix(id, "dev_"):
				return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
					var res contract.DeviceRetryResult
					if err := c.Call(ctx, contract.OpDeviceRetry, contract.DeviceIDInput{DeviceID: id}, &res); err != nil {
						return err
					}
					return printResult(cmd, env, res, func(w io.Writer) { renderDeviceRetried(w, res, time.Now()) })
				})
			case strings.HasPrefix(id, "req_"):
				return withClient(cmd, env, admin, func(ctx context.Context, c *client.Client) error {
					var res contract.LeaseRequestStatus
					if err := c.Call(ctx, contract.OpLeaseRequestRetry, contract.LeaseRequestRetryInput{RequestID: id}, &res); err != nil {
						return err
					}
					return printResult(cmd, env, map[string]any{"request": res.Request}, func(w io.Writer) { renderRequestRetried(id)(w, res) })
				})
			}
			return usage("retry takes a device id (dev_…) or a lease request id (req_…), got %q", id)
		},
	}
}

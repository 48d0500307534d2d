package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// deviceToolRoutes are the routes of the device tool operations: each acts
// on the lease its path names, with the rest of its input in the body (or,
// for the logs, the query).
var deviceToolRoutes = map[contract.Op]struct{ method, suffix string }{
	contract.OpAppLaunch:     {http.MethodPost, "/launch"},
	contract.OpAppTerminate:  {http.MethodPost, "/terminate"},
	contract.OpOpenURL:       {http.MethodPost, "/open-url"},
	contract.OpDeviceLogs:    {http.MethodGet, "/logs"},
	contract.OpSetLocation:   {http.MethodPut, "/location"},
	contract.OpSetAppearance: {http.MethodPut, "/appearance"},
}

// DeviceTool runs a device tool operation (launch, terminate, open-url,
// logs, location, appearance) on the lease in names, through its route,
// and decodes its answer into out: the socket's operation of the same
// name answers the same result.
func (c *Client) DeviceTool(ctx context.Context, op contract.Op, in contract.DeviceToolInput, out any) error {
	rt, ok := deviceToolRoutes[op]
	if !ok {
		return contract.Errorf(contract.CodeBadRequest, "%s is not a device tool", op)
	}
	if err := in.Validate(); err != nil {
		return err
	}
	leaseID, requester := in.Lease()
	path := "/v1/leases/" + esc(leaseID) + rt.suffix
	var body any
	var q url.Values
	switch in := in.(type) {
	case *contract.AppLaunchInput:
		body = struct {
			AppID       string   `json:"appId"`
			Args        []string `json:"args,omitempty"`
			RequesterID string   `json:"requesterId,omitempty"`
		}{in.AppID, in.Args, requester}
	case *contract.AppTerminateInput:
		body = struct {
			AppID       string `json:"appId"`
			RequesterID string `json:"requesterId,omitempty"`
		}{in.AppID, requester}
	case *contract.OpenURLInput:
		body = struct {
			URL         string `json:"url"`
			RequesterID string `json:"requesterId,omitempty"`
		}{in.URL, requester}
	case *contract.LocationInput:
		body = struct {
			Latitude    *float64 `json:"latitude"`
			Longitude   *float64 `json:"longitude"`
			RequesterID string   `json:"requesterId,omitempty"`
		}{in.Latitude, in.Longitude, requester}
	case *contract.AppearanceInput:
		body = struct {
			Appearance  contract.Appearance `json:"appearance"`
			RequesterID string              `json:"requesterId,omitempty"`
		}{in.Appearance, requester}
	case *contract.DeviceLogsInput:
		q = url.Values{}
		if in.Lines > 0 {
			q.Set("lines", strconv.Itoa(in.Lines))
		}
		if in.SinceMs > 0 {
			q.Set("since", (time.Duration(in.SinceMs) * time.Millisecond).String())
		}
		if in.Process != "" {
			q.Set("process", in.Process)
		}
		if requester != "" {
			q.Set("requesterId", requester)
		}
	default:
		return contract.Errorf(contract.CodeBadRequest, "%s: unexpected input %T", op, in)
	}
	return c.call(ctx, rt.method, path, q, body, out)
}

// Package apiview holds the JSON shapes of the HTTP API that both its
// server (internal/httpapi) and its typed client (internal/apiclient) read
// and write: the request bodies, the views the routes answer with, and the
// error body. Keeping them in one place means the client can never drift
// from what the server sends.
//
// The types are plain data; every function here is pure and safe to call
// concurrently.
package apiview

import (
	"errors"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// ErrorBody is the JSON body of every error response, and the data of a
// stream's error event.
type ErrorBody struct {
	Error *contract.Error `json:"error"`
}

// IsoTime formats epoch ms the way the views show times: RFC 3339 in UTC
// with milliseconds, so that every time has the same width.
func IsoTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(isoLayout)
}

// ParseTime reads a time IsoTime wrote back into epoch ms; 0 for "".
func ParseTime(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, err
	}
	return t.UnixMilli(), nil
}

const isoLayout = "2006-01-02T15:04:05.000Z"

// LeaseRequestBody is the body of POST /v1/lease-requests.
type LeaseRequestBody struct {
	Platform contract.Platform    `json:"platform"`
	Device   string               `json:"device,omitempty"`
	Class    contract.DeviceClass `json:"class,omitempty"`
	OS       string               `json:"os,omitempty"`
	ImageTag string               `json:"imageTag,omitempty"`
	// Mode is slim or full; omitted, the daemon's ios.defaultMode.
	Mode      contract.DeviceMode `json:"mode,omitempty"`
	TTLMs     int64               `json:"ttlMs,omitempty"`
	TimeoutMs int64               `json:"timeoutMs,omitempty"`
	NoWait    bool                `json:"noWait,omitempty"`
	// AllowDownload lets a missing runtime be downloaded (within
	// downloads.policy); the request then shows the downloading state.
	AllowDownload bool `json:"allowDownload,omitempty"`
	// LeaseID is the id the lease is to have, chosen by the client.
	LeaseID string `json:"leaseId,omitempty"`
}

// NewLeaseRequestBody is the body that asks for in; its idempotency key
// travels in the Idempotency-Key header, not the body.
func NewLeaseRequestBody(in contract.LeaseRequestInput) LeaseRequestBody {
	return LeaseRequestBody{
		Platform: in.Platform, Device: in.Model, Class: in.Class, OS: in.OSVersion, ImageTag: in.ImageTag,
		Mode: in.Mode, TTLMs: in.TTLMs, TimeoutMs: in.TimeoutMs, NoWait: in.NoWait,
		AllowDownload: in.AllowDownload, LeaseID: in.LeaseID,
	}
}

// Input is the request the body asks for, with the header's key.
func (b *LeaseRequestBody) Input(idempotencyKey string) contract.LeaseRequestInput {
	return contract.LeaseRequestInput{
		Platform:       b.Platform,
		Model:          b.Device,
		Class:          b.Class,
		OSVersion:      b.OS,
		ImageTag:       b.ImageTag,
		Mode:           b.Mode,
		TTLMs:          b.TTLMs,
		TimeoutMs:      b.TimeoutMs,
		NoWait:         b.NoWait,
		AllowDownload:  b.AllowDownload,
		IdempotencyKey: idempotencyKey,
		LeaseID:        b.LeaseID,
	}
}

// Validate checks the body with the contract's rules, under the HTTP names.
func (b *LeaseRequestBody) Validate() error {
	in := b.Input("")
	return RenameFields(in.Validate(), LeaseRequestField)
}

// LeaseRequestField maps a contract field name to the HTTP one, so that
// errors name what the client sent.
func LeaseRequestField(name string) string {
	switch name {
	case "model":
		return "device"
	case "osVersion":
		return "os"
	case "idempotencyKey":
		return "Idempotency-Key"
	}
	return name
}

// RenameFields rewrites a BAD_REQUEST about a contract field into one about
// the field as the client named it.
func RenameFields(err error, rename func(string) string) error {
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != contract.CodeBadRequest {
		return err
	}
	field, _ := ce.Details["field"].(string)
	to := rename(field)
	if field == "" || to == field {
		return err
	}
	out := ce.With("field", to)
	if rest, ok := strings.CutPrefix(out.Message, field+":"); ok {
		out.Message = to + ":" + rest
	}
	return out
}

// RenewBody is the optional body of POST /v1/leases/{id}/renew.
type RenewBody struct {
	TTLMs int64 `json:"ttlMs,omitempty"`
}

// Validate takes any body that decodes: the renewal it makes, path id and
// all, is checked whole by the contract's rules where it is served.
func (b *RenewBody) Validate() error { return nil }

// ExecBody is the body of POST /v1/leases/{id}/exec; the lease comes from
// the path.
type ExecBody struct {
	Tool        string   `json:"tool"`
	Args        []string `json:"args"`
	Stdin       *string  `json:"stdin,omitempty"`
	RequesterID string   `json:"requesterId,omitempty"`
}

// Input is the exec the body asks for on lease leaseID.
func (b *ExecBody) Input(leaseID string) contract.ExecInput {
	return contract.ExecInput{LeaseID: leaseID, Tool: b.Tool, Args: b.Args, Stdin: b.Stdin, RequesterID: b.RequesterID}
}

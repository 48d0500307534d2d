package mcpserver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/contract"
)

// app_upload_url: an app larger than a tool call carries inline reaches a
// session of /mcp as a plain HTTP upload. The tool gives a one-time URL of
// the install route (Options.UploadURL, the HTTP server's grant); the client
// POSTs the app's bytes there with no token, and the answer is what was
// installed. On stdio there is no HTTP server in between: install_app reads
// the app by its path there.

type uploadURLInput struct {
	LeaseID string `json:"leaseId" jsonschema:"the lease whose device gets the app (lease.id from the grant)"`
}

func (in *uploadURLInput) Validate() error { return checkLeaseID(in.LeaseID) }

// uploadURLResult is app_upload_url's answer.
type uploadURLResult struct {
	UploadURL string    `json:"uploadUrl"`
	Method    string    `json:"method"`
	ExpiresAt time.Time `json:"expiresAt"`
	MaxBytes  int64     `json:"maxBytes"`
}

// uploadToolName names the tool; install_app's refusal of a large app
// names it too.
const uploadToolName = "app_upload_url"

func (s *server) registerUploadTool(srv *mcp.Server) {
	srv.AddTool(&mcp.Tool{
		Name:  uploadToolName,
		Title: "A one-time URL to upload a large app to your leased device",
		Description: "Gives a one-time URL for an app larger than install_app takes inline (16 MiB): POST the app's bytes there, with no token " +
			"(curl --data-binary @App.ipa '<uploadUrl>'); the answer to that POST is what was installed, as install_app answers. " +
			"Answers with uploadUrl, method, expiresAt (10 minutes) and maxBytes. Only over HTTP (/mcp); on stdio, give install_app a path.",
		InputSchema: deviceSchema[uploadURLInput](),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)},
	}, handle(s.appUploadURL))
}

func (s *server) appUploadURL(ctx context.Context, _ *mcp.CallToolRequest, in *uploadURLInput) (any, error) {
	if s.opts.UploadURL == nil {
		return nil, contract.Errorf(contract.CodeBadRequest,
			"%s is only for a server reached over HTTP (/mcp); this one runs on your machine, so give install_app the app's path (any size), or send it as contentBase64 (at most %d MiB)",
			uploadToolName, maxInlineBytes>>20)
	}
	g, err := s.opts.UploadURL(ctx, in.LeaseID)
	if err != nil {
		return nil, err
	}
	return uploadURLResult{UploadURL: g.URL, Method: "POST", ExpiresAt: g.ExpiresAt.UTC(), MaxBytes: g.MaxBytes}, nil
}

// pointToUploadURL makes install_app's refusal of an inline app over the
// limit name app_upload_url, on a server that gives one.
func (s *server) pointToUploadURL(h mcp.ToolHandler) mcp.ToolHandler {
	if s.opts.UploadURL == nil {
		return h
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := h(ctx, req)
		if err != nil || res == nil || !res.IsError {
			return res, err
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var ce contract.Error
		if json.Unmarshal(raw, &ce) != nil || ce.Code != contract.CodeBodyTooLarge {
			return res, nil
		}
		ce.Message += "; over HTTP, " + uploadToolName + " gives a one-time URL to POST the app to (up to its maxBytes)"
		return errorResult(&ce), nil
	}
}

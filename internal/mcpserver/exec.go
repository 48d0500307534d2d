package mcpserver

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/contract"
)

// maxExecOutput bounds what run_on_device returns of each stream: the last
// bytes, where a failing command says why.
const maxExecOutput = 64 << 10

// Bounds of a run_on_device call: it answers within one MCP tool call.
const (
	defaultExecSeconds = 45
	maxExecSeconds     = 55
)

type execInput struct {
	LeaseID        string   `json:"leaseId,omitempty" jsonschema:"the lease whose device the command runs on (lease.id of the grant); may be left out only while this session holds exactly one lease, which is then used"`
	Tool           string   `json:"tool" jsonschema:"simctl for an iOS lease, adb for an Android lease"`
	Args           []string `json:"args" jsonschema:"the tool's arguments, as separate strings: [\"launch\",\"<udid>\",\"com.example.App\"] for simctl (name the device by the udid of the grant, or booted), [\"shell\",\"pm\",\"list\",\"packages\"] for adb (the device is chosen for you); commands reach the leased device only, and may not name files of the machine the device is on (install, push, pull and screenshot through simlock's file routes instead)"`
	Stdin          *string  `json:"stdin,omitempty" jsonschema:"text written to the command's standard input"`
	TimeoutSeconds *int64   `json:"timeoutSeconds,omitempty" jsonschema:"stop the command after this many seconds (default 45, at most 55) and answer EXEC_TIMEOUT"`
}

func (in *execInput) Validate() error {
	if in.TimeoutSeconds != nil && (*in.TimeoutSeconds < 1 || *in.TimeoutSeconds > maxExecSeconds) {
		return contract.BadRequest("timeoutSeconds", "must be from 1 to %d, got %d", maxExecSeconds, *in.TimeoutSeconds)
	}
	if in.LeaseID != "" {
		if err := (&contract.LeaseIDInput{LeaseID: in.LeaseID}).Validate(); err != nil {
			return err
		}
	}
	// The lease is resolved when the call runs (it may be omitted); a
	// stand-in id lets the contract check every other field now.
	x := in.exec("lse_resolved_later")
	return x.Validate()
}

func (in *execInput) exec(leaseID string) contract.ExecInput {
	timeout := int64(defaultExecSeconds)
	if in.TimeoutSeconds != nil {
		timeout = *in.TimeoutSeconds
	}
	return contract.ExecInput{LeaseID: leaseID, Tool: in.Tool, Args: slices.Clone(in.Args), Stdin: in.Stdin, TimeoutMs: timeout * 1000}
}

// execResult answers run_on_device.
type execResult struct {
	ExitCode int    `json:"exitCode"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Truncated: a stream was longer than maxExecOutput; its last bytes
	// are kept.
	Truncated bool `json:"truncated,omitempty"`
}

// tail keeps the last maxExecOutput bytes of one stream, never starting
// inside a UTF-8 character.
type tail struct {
	b       []byte
	dropped bool
}

func (t *tail) write(s string) {
	t.b = append(t.b, s...)
	// Trimming only past twice the bound keeps a long output from being
	// copied at every chunk.
	if len(t.b) > 2*maxExecOutput {
		t.trim()
	}
}

// trim drops all but the last maxExecOutput bytes.
func (t *tail) trim() {
	if over := len(t.b) - maxExecOutput; over > 0 {
		for over < len(t.b) && t.b[over]&0xC0 == 0x80 {
			over++ // a continuation byte: start at the next character
		}
		t.b = append(t.b[:0], t.b[over:]...)
		t.dropped = true
	}
}

// String is what is kept.
func (t *tail) String() string {
	t.trim()
	return string(t.b)
}

func (s *server) runOnDevice(ctx context.Context, _ *mcp.CallToolRequest, in *execInput) (any, error) {
	id, err := s.leaseArg(in.LeaseID)
	if err != nil {
		return nil, err
	}
	c, err := s.daemon(ctx, true)
	if err != nil {
		return nil, err
	}
	x := in.exec(id)
	// The daemon stops the command at x.TimeoutMs; the call waits a little
	// longer for that answer, and no longer.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(x.TimeoutMs)*time.Millisecond+5*time.Second)
	defer cancel()
	var mu sync.Mutex
	var stdout, stderr tail
	res, err := c.Exec(ctx, x, func(o contract.ExecOutput) {
		mu.Lock()
		defer mu.Unlock()
		if o.Stream == "stderr" {
			stderr.write(o.Chunk)
		} else {
			stdout.write(o.Chunk)
		}
	})
	if err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	out, errOut := stdout.String(), stderr.String()
	return execResult{ExitCode: res.ExitCode, Stdout: out, Stderr: errOut, Truncated: stdout.dropped || stderr.dropped}, nil
}

// heldIDs are the leases this session holds, in order.
func (s *server) heldIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.held))
	for id := range s.held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

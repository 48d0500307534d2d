package contract

import "strings"

// LeaseRequestGetInput reads a lease request by id. With WaitMs it waits
// until the request differs from revision AfterRev (or settles), at most
// WaitMs; a request that already differs, or has settled, answers at once.
type LeaseRequestGetInput struct {
	RequestID string `json:"requestId"`
	WaitMs    int64  `json:"waitMs,omitempty"`
	AfterRev  uint64 `json:"afterRev,omitempty"`
}

// MaxRequestWaitMs bounds one lease-request.get wait.
const MaxRequestWaitMs = 60_000

// Validate checks the input's fields.
func (in *LeaseRequestGetInput) Validate() error {
	if err := checkID("requestId", in.RequestID, true); err != nil {
		return err
	}
	if in.WaitMs < 0 || in.WaitMs > MaxRequestWaitMs {
		return BadRequest("waitMs", "must be between 0 and %d, got %d", MaxRequestWaitMs, in.WaitMs)
	}
	return nil
}

// LeaseRequestStatus answers lease-request.create and lease-request.get: the
// request as stored, the latest step of its wait while it is open, and a
// revision that grows with every change a reader could see.
type LeaseRequestStatus struct {
	Request  LeaseRequestRecord `json:"request"`
	Progress *LeaseProgress     `json:"progress,omitempty"`
	// Target is the device being readied for the request once it has left
	// the queue: what a class or a version range resolved to.
	Target *DeviceSpec `json:"target,omitempty"`
	Rev    uint64      `json:"rev"`
}

// Phase is the one word for where the request is: its stage while open
// (queued, reclaiming, provisioning, booting), else its terminal state.
func (s LeaseRequestStatus) Phase() string {
	if s.Request.State.Terminal() {
		return string(s.Request.State)
	}
	if s.Progress != nil && s.Progress.Stage != "" {
		return string(s.Progress.Stage)
	}
	if s.Request.Stage != "" {
		return string(s.Request.Stage)
	}
	return string(StageQueued)
}

// LeaseGetResult answers lease.get: an active lease and its device.
type LeaseGetResult struct {
	Lease     LeaseRecord `json:"lease"`
	RequestID string      `json:"requestId,omitempty"`
	Device    Device      `json:"device"`
}

// LeaseWatchResult answers lease.watch. Until the session ends, a
// lease-lost push follows when the lease ends for any reason but the
// session's own release.
type LeaseWatchResult struct {
	Lease LeaseRecord `json:"lease"`
}

// ExecInput runs simctl or adb against a leased device on the daemon's
// machine, output streamed back as exec-output pushes.
type ExecInput struct {
	LeaseID string   `json:"leaseId"`
	Tool    string   `json:"tool"`
	Args    []string `json:"args"`
	// Stdin, when set, is written to the command's standard input, which
	// is then closed.
	Stdin *string `json:"stdin,omitempty"`
	// RequesterID must match the lease's requester when an admin runs a
	// command on someone else's lease.
	RequesterID string `json:"requesterId,omitempty"`
	// TimeoutMs, when set, stops the command sooner than exec.timeoutMs
	// (EXEC_TIMEOUT): a caller that can wait only so long (an MCP tool call)
	// does not leave it running.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
}

// MaxExecStdin bounds ExecInput.Stdin.
const MaxExecStdin = 512 << 10

// Validate checks the input's fields.
func (in *ExecInput) Validate() error {
	if err := checkID("leaseId", in.LeaseID, true); err != nil {
		return err
	}
	if in.Tool == "" {
		return BadRequest("tool", "is required")
	}
	if err := checkLen("tool", in.Tool, 64); err != nil {
		return err
	}
	if len(in.Args) > 256 {
		return BadRequest("args", "at most 256 arguments, got %d", len(in.Args))
	}
	for _, a := range in.Args {
		if len(a) > 4096 || strings.ContainsRune(a, 0) {
			return BadRequest("args", "each argument must be at most 4096 bytes with no NUL")
		}
	}
	if in.Stdin != nil && len(*in.Stdin) > MaxExecStdin {
		return BadRequest("stdin", "must be at most %d bytes, got %d", MaxExecStdin, len(*in.Stdin))
	}
	if in.TimeoutMs < 0 || in.TimeoutMs > MaxWaitMs {
		return BadRequest("timeoutMs", "must be from 1 to %d, got %d", int64(MaxWaitMs), in.TimeoutMs)
	}
	return checkID("requesterId", in.RequesterID, false)
}

// ExecOutput is one chunk of a running command's output. Chunk is UTF-8 and
// never splits a character.
type ExecOutput struct {
	Stream string `json:"stream"` // stdout or stderr
	Chunk  string `json:"chunk"`
}

// ExecResult answers device.exec once the command has exited.
type ExecResult struct {
	ExitCode int `json:"exitCode"`
}

// TokenRole is what an HTTP bearer token may do.
type TokenRole string

// The token roles. An operator token acts with the admin role.
const (
	TokenAgent    TokenRole = "agent"
	TokenOperator TokenRole = "operator"
)

// TokenRecord describes a token; its secret is shown once, at creation, and
// only its SHA-256 hash is kept.
type TokenRecord struct {
	ID        string    `json:"id"`
	Role      TokenRole `json:"role"`
	Label     string    `json:"label,omitempty"`
	CreatedAt int64     `json:"createdAt"`
}

// SessionRole is the protocol role a token's holder acts with.
func (t TokenRecord) SessionRole() Role {
	if t.Role == TokenOperator {
		return RoleAdmin
	}
	return RoleAgent
}

// TokenCreateInput makes a token.
type TokenCreateInput struct {
	Role  TokenRole `json:"role"`
	Label string    `json:"label,omitempty"`
}

// Validate checks the input's fields.
func (in *TokenCreateInput) Validate() error {
	if in.Role != TokenAgent && in.Role != TokenOperator && in.Role != TokenWorker {
		return ParseEnumError("role", string(in.Role), string(TokenAgent), string(TokenOperator), string(TokenWorker))
	}
	return checkLen("label", in.Label, 128)
}

// TokenCreateResult carries the secret; it is never shown again.
type TokenCreateResult struct {
	Token  TokenRecord `json:"token"`
	Secret string      `json:"secret"`
}

// TokenListResult answers token.list, oldest first.
type TokenListResult struct {
	Tokens []TokenRecord `json:"tokens"`
}

// TokenRevokeInput names a token to revoke.
type TokenRevokeInput struct {
	ID string `json:"id"`
}

// Validate checks the input's fields.
func (in *TokenRevokeInput) Validate() error { return checkID("id", in.ID, true) }

// TokenRevokeResult says whether a token was revoked (false: no such token).
type TokenRevokeResult struct {
	Revoked bool `json:"revoked"`
}

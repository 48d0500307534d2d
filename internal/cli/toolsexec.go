package cli

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/simlock/simlock/internal/apiclient"
	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// execOnLease runs `simlock simctl|adb <args>` on a gateway, which has no
// devices of its own to hand back a command for: as device.exec on the
// caller's lease, on the lease's worker, whose own rules decide what runs
// (a gateway's forward is a remote caller there: no argument may name a
// file of the worker's machine). Piped stdin is the command's; its output
// streams to ours; the tool's exit status is the answer.
//
// pick finds the lease when the command line names none.
func execOnLease(ctx context.Context, env Env, c agentAPI, pick func(context.Context) (string, error), in contract.PassthroughInput) error {
	id := in.LeaseID
	if id == "" {
		var err error
		if id, err = pick(ctx); err != nil {
			return err
		}
	}
	x := contract.ExecInput{LeaseID: id, Tool: in.Tool, Args: in.Args}
	if x.Args == nil {
		x.Args = []string{}
	}
	if !env.StdinIsTerminal && env.Stdin != nil {
		b, err := io.ReadAll(io.LimitReader(env.Stdin, contract.MaxExecStdin+1))
		if err != nil {
			return contract.Errorf(contract.CodeInternal, "read stdin: %v", err)
		}
		if len(b) > contract.MaxExecStdin {
			return contract.BadRequest("stdin", "is over %d KiB; a command through a gateway takes at most that", contract.MaxExecStdin>>10)
		}
		if len(b) > 0 {
			s := string(b)
			x.Stdin = &s
		}
	}
	if err := x.Validate(); err != nil {
		return err
	}
	var mu sync.Mutex
	res, err := c.Exec(ctx, x, func(o contract.ExecOutput) {
		mu.Lock()
		defer mu.Unlock()
		w := env.Stdout
		if o.Stream == "stderr" {
			w = env.Stderr
		}
		_, _ = io.WriteString(w, o.Chunk)
	})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return &exitError{code: res.ExitCode, err: fmt.Errorf("%s exited %d", in.Tool, res.ExitCode), quiet: true}
	}
	return nil
}

// onlyRemoteLeaseOn is onlyLeaseOn over the remote profile: the leases the
// token holds, each looked up for its platform.
func onlyRemoteLeaseOn(ctx context.Context, c *apiclient.Client, tool string) (string, error) {
	leases, err := c.Leases(ctx)
	if err != nil {
		return "", err
	}
	var held []contract.LeaseGetResult
	owner := ""
	for _, l := range leases {
		v, err := c.Lease(ctx, l.ID)
		if err != nil {
			continue // ended meanwhile
		}
		// Every lease an agent token lists is its own.
		owner = l.OwnerID
		held = append(held, contract.LeaseGetResult{Lease: l, Device: contract.Device{ID: v.DeviceID, Spec: contract.DeviceSpec{Platform: v.Platform, Model: v.Device, OSVersion: v.OS}}})
	}
	l, err := contract.OnlyToolLease(tool, owner, held)
	if err != nil {
		return "", err
	}
	if l == nil {
		return "", contract.BadRequest("leaseId", "%s runs on one of your %s leases and you hold none: lease a device first", tool, contract.ToolPlatform(tool))
	}
	return l.Lease.ID, nil
}

// onlyLeaseOn is the caller's only active lease on tool's platform, picked
// as a passthrough on a worker picks it (contract.OnlyToolLease); holding
// none or several, the caller must name one (a command through a gateway
// runs on a lease's worker, so there is no lease-less one).
func onlyLeaseOn(ctx context.Context, c *client.Client, principal, tool string) (string, error) {
	var list contract.LeaseListResult
	if err := c.Call(ctx, contract.OpLeaseList, contract.Empty{}, &list); err != nil {
		return "", err
	}
	var held []contract.LeaseGetResult
	for _, l := range list.Leases {
		if l.OwnerID != principal {
			continue
		}
		var got contract.LeaseGetResult
		if err := c.Call(ctx, contract.OpLeaseGet, contract.LeaseIDInput{LeaseID: l.ID}, &got); err == nil {
			held = append(held, got)
		}
	}
	l, err := contract.OnlyToolLease(tool, principal, held)
	if err != nil {
		return "", err
	}
	if l == nil {
		return "", contract.BadRequest("leaseId", "on a gateway %s runs on one of your %s leases, on its worker, and you hold none: lease a device first", tool, contract.ToolPlatform(tool))
	}
	return l.Lease.ID, nil
}

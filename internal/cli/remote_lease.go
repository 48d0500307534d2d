package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/apiclient"
	"github.com/simlock/simlock/internal/apiview"
	"github.com/simlock/simlock/internal/contract"
)

// runRemoteLease is simlock lease over the remote profile: the request's
// event stream drives the same progress lines and bars as the socket's
// pushes, the grant prints as on the socket, and the lease is held here
// (holdRemote) unless --detach.
func runRemoteLease(ctx context.Context, cmd *cobra.Command, env Env, c *apiclient.Client, in contract.LeaseRequestInput, mode string, detach, exportEnv bool, bindPID int) error {
	if bindPID != 0 {
		// The daemon would watch a pid of its own machine, not this one.
		return usage("--bind-pid names a process of the daemon's machine; with a remote profile, hold the lease (no --detach) and end this command with the process")
	}
	grant, err := requestWithProgress(ctx, env, c, in, mode)
	if err != nil {
		return err
	}
	// An HTTP token acts as an agent: the API has no admin sessions.
	if err := showGrant(cmd, env, grant, contract.RoleAgent, mode, detach, exportEnv); err != nil {
		return err
	}
	if detach {
		return nil
	}
	return holdRemote(ctx, c, env, grant.Lease, mode == "human")
}

// holdRemote keeps a lease granted over HTTP alive until the command is
// told to stop (SIGINT, SIGTERM, its parent exiting), then releases it.
// It renews every third of the TTL and listens on the lease's event stream
// for its loss, which exits 14 as on the socket.
//
// A renewal that fails for any reason but the lease being unknown (the
// server unreachable, a gateway restarting, its worker not yet back) is
// said once and tried again every reconnectEvery, until the lease's last
// known deadline: a gateway that comes back in time finds the lease held
// and renewed; one that does not, or that no longer knows the lease, ends
// the command as the socket's hold does (DAEMON_CONNECTION_LOST, or exit
// 14).
func holdRemote(ctx context.Context, c *apiclient.Client, env Env, lease contract.LeaseRecord, human bool) error {
	say := sayer(env, human)
	every := max(time.Duration(lease.TTLMs)*time.Millisecond/3, 10*time.Millisecond)
	renew := time.NewTimer(every)
	defer renew.Stop()
	parent := time.NewTicker(time.Second)
	defer parent.Stop()
	ppid := os.Getppid()
	deadline := lease.TTLDeadline

	wctx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	lost := make(chan string, 1)
	watching.Add(1)
	go func() {
		defer watching.Done()
		watchRemoteLease(wctx, c, lease.ID, say, lost)
	}()
	defer func() {
		stopWatch()
		watching.Wait()
	}()

	release := func() error {
		stopWatch()
		watching.Wait()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := c.Release(rctx, lease.ID)
		switch code := contract.AsError(err); {
		case err == nil:
			if human {
				fmt.Fprintf(env.Stderr, "✓ Released lease %s; its device is cleaned for the next agent\n", lease.ID)
			}
			return nil
		case code.Code == contract.CodeUnknownLease:
			return nil
		case code.Code == contract.CodeDaemonConnectionLost:
			return fail(contract.Errorf(contract.CodeDaemonConnectionLost,
				"could not release lease %s: the daemon is not reachable; it ends at %s unless renewed",
				lease.ID, time.UnixMilli(deadline).UTC().Format(time.RFC3339)).With("leaseId", lease.ID))
		}
		return fail(err)
	}
	endLost := func(reason string) error {
		say(fmt.Sprintf("✗ Lease %s on %s ended under this command: %s", lease.ID, lease.DeviceID, lostWords(reason)),
			map[string]any{"push": contract.PushLeaseLost, "leaseId": lease.ID, "deviceId": lease.DeviceID, "reason": reason})
		return &exitError{code: contract.ExitLeaseLost, err: fmt.Errorf("lease lost: %s", reason), quiet: true}
	}
	away := false
	for {
		select {
		case <-ctx.Done():
			return release()
		case <-parent.C:
			if os.Getppid() != ppid {
				return release()
			}
		case reason := <-lost:
			return endLost(reason)
		case <-renew.C:
			rctx, cancel := context.WithTimeout(ctx, min(every, 10*time.Second))
			v, err := c.RenewLease(rctx, lease.ID, 0)
			cancel()
			switch {
			case ctx.Err() != nil:
				return release()
			case err == nil:
				if ms, perr := parseISO(v.ExpiresAt); perr == nil {
					deadline = ms
				}
				if away {
					away = false
					say("✓ Reconnected to the daemon; lease "+lease.ID+" is still held and renewed",
						map[string]any{"notice": "daemon-reconnected", "leaseId": lease.ID,
							"message": "reconnected to the daemon; lease " + lease.ID + " is still held and renewed"})
				}
				renew.Reset(every)
				continue
			case contract.AsError(err).Code == contract.CodeUnknownLease:
				return endLost("unknown-lease")
			}
			if time.Now().UnixMilli() >= deadline {
				return fail(contract.Errorf(contract.CodeDaemonConnectionLost,
					"lost the daemon while holding lease %s and it did not come back before the lease's end (%s)",
					lease.ID, time.UnixMilli(deadline).UTC().Format(time.RFC3339)).
					With("leaseId", lease.ID).With("ttlDeadline", deadline))
			}
			if !away {
				away = true
				until := time.UnixMilli(deadline).UTC().Format(time.RFC3339)
				say(fmt.Sprintf("! The daemon went away; holding lease %s and reconnecting until %s, when it ends unless renewed", lease.ID, until),
					map[string]any{"notice": "daemon-connection-lost", "leaseId": lease.ID,
						"message": fmt.Sprintf("lost the daemon while holding lease %s (%v); reconnecting until %s, when the lease ends unless renewed", lease.ID, err, until)})
			}
			renew.Reset(reconnectEvery)
		}
	}
}

// watchRemoteLease follows the lease's event stream, telling of its
// device's troubles and sending the reason on lost when the lease ends.
// A broken stream is opened again (the renewals tell whether the server is
// there at all); the stream's UNKNOWN_LEASE is the lease's end.
func watchRemoteLease(ctx context.Context, c *apiclient.Client, leaseID string, say func(string, map[string]any), lost chan<- string) {
	for ctx.Err() == nil {
		err := c.WatchLease(ctx, leaseID, func(n apiclient.LeaseNotice) {
			switch {
			case n.Lost != nil:
				lost <- n.Lost.Reason
			case n.Event == "device_unhealthy":
				say(fmt.Sprintf("! Device %s stopped answering; simlock is booting it again under lease %s", n.Device.DeviceID, leaseID),
					map[string]any{"push": contract.PushDeviceUnhealthy, "leaseId": leaseID, "deviceId": n.Device.DeviceID})
			case n.Event == "device_recovered":
				attempts := 0
				if n.Device.Attempts != nil {
					attempts = *n.Device.Attempts
				}
				say(fmt.Sprintf("✓ Device %s runs again (%d attempts); lease %s is still yours", n.Device.DeviceID, attempts, leaseID),
					map[string]any{"push": contract.PushDeviceRecovered, "leaseId": leaseID, "deviceId": n.Device.DeviceID, "attempts": attempts})
			}
		})
		if err == nil {
			return // the lease was lost, and said so
		}
		if contract.AsError(err).Code == contract.CodeUnknownLease && ctx.Err() == nil {
			select {
			case lost <- "unknown-lease":
			default:
			}
			return
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func parseISO(s string) (int64, error) {
	ms, err := apiview.ParseTime(s)
	if err != nil {
		return 0, errors.Join(errors.New("a renewal's expiresAt"), err)
	}
	return ms, nil
}

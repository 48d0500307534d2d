package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
)

// heldLease is a lease this session was granted and keeps alive.
type heldLease struct {
	mu       sync.Mutex
	rec      contract.LeaseRecord
	deviceID string
	halt     chan struct{}
	once     sync.Once
}

func (h *heldLease) stop() { h.once.Do(func() { close(h.halt) }) }

func (h *heldLease) record() contract.LeaseRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rec
}

// adopt starts keeping a granted lease: renewals at TTL/3 and a watch for
// its end.
func (s *server) adopt(ctx context.Context, g contract.LeaseGrant) {
	h := &heldLease{rec: g.Lease, deviceID: g.Device.ID, halt: make(chan struct{})}
	s.mu.Lock()
	if _, ok := s.held[g.Lease.ID]; ok {
		s.mu.Unlock()
		return
	}
	s.held[g.Lease.ID] = h
	delete(s.gone, g.Lease.ID)
	s.mu.Unlock()
	if c, err := s.daemon(ctx, false); err == nil {
		s.watch(ctx, c, g.Lease.ID)
	}
	go s.keep(h)
}

// keep renews a held lease (client.Hold) until it is released, lost, or
// the session ends; renewals that cannot reach the daemon are tried again,
// over a new session once the old one is lost.
func (s *server) keep(h *heldLease) {
	ctx, cancel := context.WithCancel(s.life)
	defer cancel()
	go func() {
		select {
		case <-h.halt:
			cancel()
		case <-ctx.Done():
		}
	}()
	rec := h.record()
	connect := func(ctx context.Context) (*client.Client, error) { return s.daemon(ctx, false) }
	risk := client.NewRisk(rec)
	err := client.Hold(ctx, rec, connect, func(renewed contract.LeaseRecord, err error) {
		if err != nil {
			s.log.Warn("lease renewal failed; trying again", "leaseId", rec.ID, "err", err)
		} else {
			h.mu.Lock()
			h.rec = renewed
			h.mu.Unlock()
		}
		if ch := risk.Note(time.Now(), renewed, err); ch != client.RiskNone {
			s.riskNotice(rec.ID, h.deviceID, ch, risk, err)
		}
	})
	if errors.Is(err, client.ErrLeaseGone) {
		s.lost(rec.ID, h.deviceID, "ended")
	}
}

// lost forgets a held lease the daemon ended and warns the client.
func (s *server) lost(leaseID, deviceID, reason string) {
	s.mu.Lock()
	h, ok := s.held[leaseID]
	if ok {
		delete(s.held, leaseID)
		s.gone[leaseID] = reason
		s.lastGone = leaseID
	}
	ss := s.ss
	s.mu.Unlock()
	if !ok {
		return
	}
	h.stop()
	if deviceID == "" {
		deviceID = h.deviceID
	}
	msg := fmt.Sprintf("Lease %s on device %s is no longer yours (%s). Stop using the device; call lease_simulator for another.", leaseID, deviceID, lossWords(reason))
	s.log.Warn("lease lost", "leaseId", leaseID, "deviceId", deviceID, "reason", reason)
	if ss == nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.life, 5*time.Second)
	defer cancel()
	_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "simlock", Data: map[string]any{
		"lease_id": leaseID, "device_id": deviceID, "reason": reason, "message": msg,
	}})
}

func lossWords(reason string) string {
	switch reason {
	case string(contract.EndExpired):
		return "its TTL ran out without a renewal"
	case string(contract.EndKilled):
		return "an operator released it"
	case string(contract.EndDeviceLost):
		return "the device stopped and could not be recovered"
	case string(contract.EndReleased):
		return "it was released"
	}
	return "the daemon no longer has it"
}

// release ends a lease this agent owns. Releasing again a lease this
// session already released, or that the daemon ended under it, succeeds
// with released:false: the lease is not held either way, which is what the
// caller asked for.
func (s *server) release(ctx context.Context, id string) (contract.ReleaseResult, error) {
	s.mu.Lock()
	h := s.held[id]
	_, ended := s.gone[id]
	s.mu.Unlock()
	c, err := s.daemon(ctx, true)
	if err != nil {
		return contract.ReleaseResult{}, err
	}
	res, err := c.Release(ctx, id)
	if err != nil {
		if ended && h == nil && contract.AsError(err).Code == contract.CodeUnknownLease {
			return contract.ReleaseResult{LeaseID: id, Released: false}, nil
		}
		return res, err
	}
	s.mu.Lock()
	delete(s.held, id)
	s.gone[id] = string(contract.EndReleased)
	s.lastGone = id
	s.mu.Unlock()
	if h != nil {
		h.stop()
	}
	return res, nil
}

// deviceNotice tells the client its device crashed and is being booted
// again (a warning), or runs again (info). The lease is still held.
func (s *server) deviceNotice(in contract.Inbound) {
	s.mu.Lock()
	_, held := s.held[in.LeaseID]
	ss := s.ss
	s.mu.Unlock()
	if !held || ss == nil {
		return
	}
	level := mcp.LoggingLevel("warning")
	data := map[string]any{"lease_id": in.LeaseID, "device_id": in.DeviceID, "reason": "crashed",
		"message": fmt.Sprintf("Device %s of lease %s stopped; simlock is booting it again. Your lease is kept; retry what failed once it is back.", in.DeviceID, in.LeaseID)}
	if in.Push == contract.PushDeviceRecovered {
		level = "info"
		data = map[string]any{"lease_id": in.LeaseID, "device_id": in.DeviceID, "attempts": in.Attempts,
			"message": fmt.Sprintf("Device %s of lease %s runs again (after %d attempt(s)); app state may be gone.", in.DeviceID, in.LeaseID, in.Attempts)}
	}
	ctx, cancel := context.WithTimeout(s.life, 5*time.Second)
	defer cancel()
	_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: "simlock", Data: data})
}

// riskNotice tells the client that a held lease is at risk, its renewals
// failing (a warning: the lease ends at its deadline unless one succeeds;
// the server keeps renewing), or safe again (info).
func (s *server) riskNotice(leaseID, deviceID string, ch client.RiskChange, risk *client.Risk, err error) {
	s.mu.Lock()
	_, held := s.held[leaseID]
	ss := s.ss
	s.mu.Unlock()
	if !held || ss == nil {
		return
	}
	expires := risk.ExpiresAt()
	level := mcp.LoggingLevel("info")
	data := map[string]any{"lease_id": leaseID, "device_id": deviceID, "at_risk": false, "expires_at": expires.UnixMilli(),
		"message": fmt.Sprintf("lease safe again: lease %s renewed, expires at %s", leaseID, expires.UTC().Format(time.RFC3339))}
	if ch == client.RiskAtRisk {
		ce := contract.AsError(err)
		level = "warning"
		data = map[string]any{"lease_id": leaseID, "device_id": deviceID, "at_risk": true, "expires_at": expires.UnixMilli(),
			"since": risk.Since().UnixMilli(), "code": ce.Code,
			"message": fmt.Sprintf("%s (lease %s: %s); still renewing. Finish or save what you can: the lease ends then unless a renewal succeeds.",
				risk.AtRiskLine(), leaseID, ce.Error())}
	}
	ctx, cancel := context.WithTimeout(s.life, 5*time.Second)
	defer cancel()
	_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: "simlock", Data: data})
}

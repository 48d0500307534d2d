package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/simlock/simlock/internal/contract"
)

// What a worker may claim. A worker's answer is a claim: the gateway checks
// it against these bounds before it uses any of it, and a worker that
// exceeds one is disconnected with the reason.
const (
	maxRecords  = 100_000 // devices, leases or waiting requests in one answer
	maxCount    = 1 << 20 // any count (running, devices, queue depth)
	maxText     = 256     // ids, names, versions
	maxCatalogs = 8
	maxModels   = 10_000
)

// claimError is a worker's answer that failed a check.
type claimError struct {
	what string
	msg  string
}

func (e *claimError) Error() string { return e.what + ": " + e.msg }

func bad(what, format string, args ...any) error {
	return &claimError{what: what, msg: fmt.Sprintf(format, args...)}
}

// checkText refuses empty (when required), oversized or non-printable text.
func checkText(what, s string, required bool) error {
	if s == "" {
		if required {
			return bad(what, "is empty")
		}
		return nil
	}
	if len(s) > maxText {
		return bad(what, "is %d bytes, more than %d", len(s), maxText)
	}
	if !utf8.ValidString(s) {
		return bad(what, "is not UTF-8")
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return bad(what, "holds the non-printable character %U", r)
		}
	}
	return nil
}

func checkCount(what string, n int) error {
	if n < 0 || n > maxCount {
		return bad(what, "is %d, outside 0..%d", n, maxCount)
	}
	return nil
}

func checkPlatform(what string, p contract.Platform) error {
	if !p.Valid() {
		return bad(what, "is %q, not a platform", clip(string(p)))
	}
	return nil
}

func checkState(what string, s contract.DeviceState) error {
	switch s {
	case contract.DeviceProvisioning, contract.DeviceReady, contract.DeviceLeased, contract.DeviceReclaiming,
		contract.DeviceShutdown, contract.DeviceQuarantined, contract.DeviceDeleted:
		return nil
	}
	return bad(what, "is %q, not a device state", clip(string(s)))
}

// clip bounds a worker's claim quoted back in a finding.
func clip(s string) string { return contract.ClipTo(s, 40) }

// checkStatus checks a worker's status.get answer.
func checkStatus(s contract.Status) error {
	if err := checkText("daemon.version", s.Daemon.Version, true); err != nil {
		return err
	}
	switch s.Daemon.Health {
	case "starting", "running", "stopping", "failed":
	default:
		return bad("daemon.health", "is %q", clip(s.Daemon.Health))
	}
	if s.Daemon.Mode != "" && s.Daemon.Mode != contract.ModeWorker {
		return bad("daemon.mode", "is %q: only a worker joins a gateway", clip(s.Daemon.Mode))
	}
	if s.EventSeq < 0 {
		return bad("eventSeq", "is %d", s.EventSeq)
	}
	for _, t := range []struct {
		what string
		s    string
	}{{"host.os", s.Host.OS}, {"host.arch", s.Host.Arch}, {"host.osVersion", s.Host.OSVersion}} {
		if err := checkText(t.what, t.s, false); err != nil {
			return err
		}
	}
	if err := checkCount("host.cpus", s.Host.CPUs); err != nil {
		return err
	}
	if s.Host.RAMBytes < 0 {
		return bad("host.ramBytes", "is negative")
	}
	if c := s.Capacity; c != nil {
		if err := checkCapacity(*c); err != nil {
			return err
		}
	}
	if err := checkCount("queueDepth", s.QueueDepth); err != nil {
		return err
	}
	if len(s.Devices) > maxRecords || len(s.Leases) > maxRecords || len(s.Waiting) > maxRecords {
		return bad("status", "lists more than %d records", maxRecords)
	}
	for i, d := range s.Devices {
		if err := checkDevice(fmt.Sprintf("devices[%d]", i), d); err != nil {
			return err
		}
	}
	for i, l := range s.Leases {
		if err := checkLease(fmt.Sprintf("leases[%d]", i), l); err != nil {
			return err
		}
	}
	for i, w := range s.Waiting {
		what := fmt.Sprintf("waiting[%d]", i)
		if err := checkText(what+".requestId", w.RequestID, true); err != nil {
			return err
		}
		if err := checkText(what+".requesterId", w.RequesterID, true); err != nil {
			return err
		}
		if err := checkPlatform(what+".requestSpec.platform", w.Spec.Platform); err != nil {
			return err
		}
		if err := checkText(what+".stage", w.Stage, true); err != nil {
			return err
		}
		if err := checkCount(what+".queuePosition", w.QueuePosition); err != nil {
			return err
		}
		if err := checkText(what+".deviceId", w.DeviceID, false); err != nil {
			return err
		}
	}
	if len(s.Installs) > 64 {
		return bad("installs", "lists %d installs", len(s.Installs))
	}
	for i, in := range s.Installs {
		what := fmt.Sprintf("installs[%d]", i)
		if err := checkPlatform(what+".platform", in.Platform); err != nil {
			return err
		}
		if err := checkText(what+".component", in.Component, true); err != nil {
			return err
		}
	}
	return nil
}

func checkCapacity(c contract.Capacity) error {
	if err := checkText("capacity.strategy", c.Strategy, false); err != nil {
		return err
	}
	g := c.Global
	for _, n := range []struct {
		what string
		n    int
	}{{"capacity.global.running", g.Running}, {"capacity.global.reserved", g.Reserved},
		{"capacity.global.maxRunning", g.MaxRunning}, {"capacity.global.warm", g.Warm}} {
		if err := checkCount(n.what, n.n); err != nil {
			return err
		}
	}
	for p, pc := range c.Platforms {
		if err := checkPlatform("capacity.platforms", p); err != nil {
			return err
		}
		for _, n := range []int{pc.Running, pc.Reserved, pc.MaxRunning, pc.Devices, pc.MaxDevices, pc.Warm} {
			if err := checkCount("capacity.platforms."+string(p), n); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkDevice(what string, d contract.Device) error {
	for _, t := range []struct {
		what string
		s    string
		req  bool
	}{{".id", d.ID, true}, {".driver", d.Driver, false}, {".driverDeviceId", d.DriverDeviceID, false},
		{".spec.model", d.Spec.Model, false}, {".spec.osVersion", d.Spec.OSVersion, false}, {".spec.imageTag", d.Spec.ImageTag, false},
		{".address", d.Address, false}, {".leaseId", d.LeaseID, false}} {
		if err := checkText(what+t.what, t.s, t.req); err != nil {
			return err
		}
	}
	if err := checkPlatform(what+".spec.platform", d.Spec.Platform); err != nil {
		return err
	}
	if err := checkSpecMode(what+".spec.mode", d.Spec.Mode); err != nil {
		return err
	}
	return checkState(what+".state", d.State)
}

// checkSpecMode checks a device spec's mode: slim, or none for a full
// device.
func checkSpecMode(what string, m contract.DeviceMode) error {
	if m != "" && m != contract.DeviceModeSlim {
		return bad(what, "is %q: a device spec's mode is slim or none", clip(string(m)))
	}
	return nil
}

func checkLease(what string, l contract.LeaseRecord) error {
	for _, t := range []struct {
		what string
		s    string
	}{{".id", l.ID}, {".deviceId", l.DeviceID}, {".requesterId", l.RequesterID}, {".ownerId", l.OwnerID}} {
		if err := checkText(what+t.what, t.s, true); err != nil {
			return err
		}
	}
	if strings.Contains(l.ID, leaseIDSep) {
		// The gateway names it <workerId>.<leaseId>, split at the last '.'.
		return bad(what+".id", "holds a %q", leaseIDSep)
	}
	if l.TTLMs < 0 || l.TTLMs > contract.MaxTTLMs {
		return bad(what+".ttlMs", "is %d, outside 0..%d", l.TTLMs, contract.MaxTTLMs)
	}
	if l.GrantedAt < 0 || l.TTLDeadline < 0 || l.LastRenewedAt < 0 {
		return bad(what, "has a negative time")
	}
	return nil
}

func checkRequest(what string, r contract.LeaseRequestRecord) error {
	for _, t := range []struct {
		what string
		s    string
		req  bool
	}{{".id", r.ID, true}, {".requesterId", r.RequesterID, true}, {".ownerId", r.OwnerID, false},
		{".idempotencyKey", r.IdempotencyKey, false}, {".leaseId", r.LeaseID, false}, {".stage", string(r.Stage), false},
		{".requestSpec.model", r.Spec.Model, false}, {".requestSpec.osVersion", r.Spec.OSVersion, false},
		{".requestSpec.imageTag", r.Spec.ImageTag, false}} {
		if err := checkText(what+t.what, t.s, t.req); err != nil {
			return err
		}
	}
	if err := checkPlatform(what+".requestSpec.platform", r.Spec.Platform); err != nil {
		return err
	}
	if err := contract.CheckDeviceMode(r.Spec.Mode); err != nil {
		return bad(what+".requestSpec.mode", "%v", err)
	}
	switch r.State {
	case contract.RequestQueued, contract.RequestGranted, contract.RequestFailed, contract.RequestCancelled, contract.RequestStarting:
	default:
		return bad(what+".state", "is %q, not a request state", clip(string(r.State)))
	}
	if r.CreatedAt < 0 || r.SettledAt < 0 {
		return bad(what, "has a negative time")
	}
	return checkCount(what+".queuePosition", r.QueuePosition)
}

// checkCatalog checks a worker's catalog.get answer.
func checkCatalog(r contract.CatalogResult) error {
	if len(r.Platforms) > maxCatalogs {
		return bad("catalog", "has %d platforms", len(r.Platforms))
	}
	for i, c := range r.Platforms {
		what := fmt.Sprintf("catalog[%d]", i)
		if err := checkPlatform(what+".platform", c.Platform); err != nil {
			return err
		}
		if len(c.Models) > maxModels || len(c.Runtimes) > maxModels || len(c.ModelRuntimes) > maxModels {
			return bad(what, "lists more than %d models or runtimes", maxModels)
		}
		for _, m := range c.Models {
			if err := checkText(what+".models[]", m, true); err != nil {
				return err
			}
		}
		for _, v := range c.Runtimes {
			if err := checkText(what+".runtimes[]", v, true); err != nil {
				return err
			}
		}
		if len(c.SlimRuntimes) > maxModels {
			return bad(what, "lists more than %d slim runtimes", maxModels)
		}
		for _, v := range c.SlimRuntimes {
			if err := checkText(what+".slimRuntimes[]", v, true); err != nil {
				return err
			}
		}
		if err := contract.CheckDeviceMode(c.DefaultMode); err != nil {
			return bad(what+".defaultMode", "%v", err)
		}
		if len(c.Images) > maxModels {
			return bad(what, "lists more than %d images", maxModels)
		}
		for _, im := range c.Images {
			for _, s := range []string{im.Runtime, im.Tag, im.ABI} {
				if err := checkText(what+".images[]", s, true); err != nil {
					return err
				}
			}
		}
		for m, vs := range c.ModelRuntimes {
			if err := checkText(what+".modelRuntimes key", m, true); err != nil {
				return err
			}
			if len(vs) > maxModels {
				return bad(what+".modelRuntimes", "lists %d runtimes for one model", len(vs))
			}
		}
	}
	return nil
}

// maxEnvironment bounds the variables a grant may carry (a driver sets a
// handful).
const maxEnvironment = 64

// checkGrant checks a worker's answer to a forwarded lease.request.
func checkGrant(g contract.LeaseGrant) error {
	if err := checkLease("grant.lease", g.Lease); err != nil {
		return err
	}
	if g.EventSeq < 0 {
		return bad("grant.eventSeq", "is %d", g.EventSeq)
	}
	d := g.Device
	for _, t := range []struct{ what, s string }{{".id", d.ID}, {".driverDeviceId", d.DriverDeviceID},
		{".spec.model", d.Spec.Model}, {".spec.osVersion", d.Spec.OSVersion}, {".spec.imageTag", d.Spec.ImageTag}, {".address", d.Address}} {
		if err := checkText("grant.device"+t.what, t.s, t.what == ".id"); err != nil {
			return err
		}
	}
	if err := contract.CheckDeviceMode(d.Mode); err != nil {
		return bad("grant.device.mode", "%v", err)
	}
	if err := checkSpecMode("grant.device.spec.mode", d.Spec.Mode); err != nil {
		return err
	}
	if len(g.Environment) > maxEnvironment {
		return bad("grant.environment", "has %d variables", len(g.Environment))
	}
	for k, v := range g.Environment {
		if err := checkText("grant.environment key", k, true); err != nil {
			return err
		}
		if err := checkText("grant.environment."+k, v, false); err != nil {
			return err
		}
	}
	if d.ID != g.Lease.DeviceID {
		return bad("grant.device.id", "is %q, but the lease names device %q", d.ID, g.Lease.DeviceID)
	}
	return checkPlatform("grant.device.spec.platform", d.Spec.Platform)
}

// maxWorkerAge is how far before the gateway's clock a time a worker
// reports may be: a catch-up after an outage relays hours of a worker's
// history, and a worker disconnected longer than gateway.disconnectedRetentionMs
// (a day by default) is followed from its present when it comes back.
const maxWorkerAge = 24 * time.Hour

// workerTime is a time a worker reported (epoch ms), as the gateway takes
// it: the worker's own clock, which its other times are read against, when
// it is at most maxWorkerAge before the gateway's and not after it; else
// the gateway's. Nothing a worker did happened after the gateway heard of
// it, and the gateway's log is pruned by time and its usage figures are
// filed by minute: a worker's clock must not decide what the log keeps,
// nor in which minute, or how long, a lease is counted.
func workerTime(at int64, now time.Time) int64 {
	n := now.UnixMilli()
	if at <= 0 || at > n || n-at > maxWorkerAge.Milliseconds() {
		return n
	}
	return at
}

// checkEvents checks a run of events a worker relays, read from its log
// after seq after: each valid, and their seqs counting up from after, as
// the worker's log hands them out. Anything else is not that log.
func checkEvents(after int64, evs []contract.Event) error {
	for _, ev := range evs {
		if err := checkEvent(ev); err != nil {
			return err
		}
		if ev.Seq <= after {
			return bad("event.seq", "is %d, after seq %d", ev.Seq, after)
		}
		after = ev.Seq
	}
	return nil
}

// checkEvent checks one event a worker relays.
func checkEvent(ev contract.Event) error {
	if err := checkText("event.id", ev.ID, true); err != nil {
		return err
	}
	if err := checkText("event.event", ev.Event, true); err != nil {
		return err
	}
	if ev.Seq <= 0 {
		return bad("event.seq", "is %d", ev.Seq)
	}
	if ev.Timestamp < 0 {
		return bad("event.timestamp", "is negative")
	}
	if len(ev.Payload) > contract.MaxFrameLen {
		return bad("event.payload", "is %d bytes", len(ev.Payload))
	}
	// A payload is stored as it came (withWorkerID adds a key to it): one
	// that is not UTF-8 could fail the store's commit (PostgreSQL refuses
	// it as text), which other workers' relayed batches share.
	if !utf8.Valid(ev.Payload) {
		return bad("event.payload", "is not UTF-8")
	}
	// What decoding it into a map would take (an object, or null, which
	// withWorkerID refuses), without building the map: every relayed event
	// passes here.
	p := bytes.TrimSpace(ev.Payload)
	if !json.Valid(p) || (p[0] != '{' && string(p) != "null") {
		return bad("event.payload", "is not a JSON object")
	}
	return nil
}

// checkJobEvent checks one event a worker relays from its install: phase
// names and statuses from the contract's lists, figures in range, text
// within bounds. The worker's id in it is replaced, never trusted.
func checkJobEvent(ev contract.JobEvent) error {
	switch {
	case ev.Phase != nil:
		if !slices.Contains(contract.Phases(), ev.Phase.Phase) {
			return bad("install phase", "is %q, not a phase", clip(ev.Phase.Phase))
		}
		switch ev.Phase.Status {
		case contract.PhaseStart, contract.PhaseProgress, contract.PhaseDone, contract.PhaseError:
		default:
			return bad("install phase status", "is %q", clip(ev.Phase.Status))
		}
		return checkText("install component", ev.Phase.Component, false)
	case ev.Progress != nil:
		p := ev.Progress
		if p.Percent != nil && !(*p.Percent >= 0 && *p.Percent <= contract.MaxPercent) {
			return bad("install percent", "is %v, outside 0..100", *p.Percent)
		}
		if p.Bytes < 0 || p.Total < 0 || p.Total > contract.MaxJobBytes || p.Bytes > contract.MaxJobBytes || (p.Total > 0 && p.Bytes > p.Total) {
			return bad("install bytes", "are %d of %d", p.Bytes, p.Total)
		}
		return nil
	case ev.Log != nil:
		if ev.Log.Stream != "stdout" && ev.Log.Stream != "stderr" {
			return bad("install line stream", "is %q", clip(ev.Log.Stream))
		}
		if len(ev.Log.Line) > contract.MaxLogLine || !utf8.ValidString(ev.Log.Line) {
			return bad("install line", "is %d bytes or not UTF-8 (at most %d)", len(ev.Log.Line), contract.MaxLogLine)
		}
		return nil
	case ev.Error != nil:
		e := ev.Error
		if !slices.Contains(contract.Phases(), e.Phase) {
			return bad("install error phase", "is %q", clip(e.Phase))
		}
		if !slices.Contains(contract.Codes(), e.Code) {
			return bad("install error code", "is %q, not a code", clip(string(e.Code)))
		}
		if len(e.Message) > contract.MaxJobMessage || !utf8.ValidString(e.Message) {
			return bad("install error message", "is %d bytes or not UTF-8", len(e.Message))
		}
		return nil
	}
	return nil
}

// checkInstallResult checks a worker's answer to component.install.
func checkInstallResult(r contract.ComponentInstallResult) error {
	switch r.Outcome {
	case "installed", "already-installed":
	default:
		return bad("install outcome", "is %q", clip(r.Outcome))
	}
	return checkText("installed version", r.Version, true)
}

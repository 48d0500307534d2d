package gateway

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/store"
)

// Summaries lists every worker's line, by id.
func (f *Fleet) Summaries() []contract.WorkerSummary {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]contract.WorkerSummary, 0, len(f.workers))
	for _, w := range f.workers {
		out = append(out, w.view.Summary())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// View is one worker's whole view.
func (f *Fleet) View(id string) (contract.WorkerView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.workers[id]
	if !ok {
		return contract.WorkerView{}, unknownWorker(id)
	}
	v := w.view
	v.Devices, v.Leases, v.Waiting = nonNil(v.Devices), nonNil(v.Leases), nonNil(v.Waiting)
	return v, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func unknownWorker(id string) error {
	return contract.Errorf(contract.CodeUnknownWorker, "no worker %s is known to this gateway", id).With("workerId", id)
}

// Drain stops new work going to a worker; its leases stay. It is stored,
// so it outlives a restart of the gateway or the worker.
func (f *Fleet) Drain(ctx context.Context, id string) (contract.WorkerSummary, error) {
	return f.setDrained(ctx, id, true)
}

// Undrain ends a drain.
func (f *Fleet) Undrain(ctx context.Context, id string) (contract.WorkerSummary, error) {
	return f.setDrained(ctx, id, false)
}

func (f *Fleet) setDrained(ctx context.Context, id string, drained bool) (contract.WorkerSummary, error) {
	f.mu.Lock()
	w, ok := f.workers[id]
	if !ok {
		f.mu.Unlock()
		return contract.WorkerSummary{}, unknownWorker(id)
	}
	changed := w.view.Drained != drained
	rec := store.Worker{ID: id, Label: w.view.Label, Drained: drained, LastSeq: w.lastSeq, LastSeenAt: w.view.LastSeenAt, TokenID: w.owner}
	f.mu.Unlock()
	if changed {
		// Stored before anyone is told: a drain acknowledged survives.
		if err := f.opts.Store.PutWorker(ctx, rec); err != nil {
			return contract.WorkerSummary{}, err
		}
	}
	f.mu.Lock()
	w.view.Drained = drained
	f.reindex(w)
	s := w.view.Summary()
	f.mu.Unlock()
	if changed {
		event := contract.EvWorkerUndrained
		if drained {
			event = contract.EvWorkerDrained
		}
		f.emit(event, map[string]any{"workerId": id, "label": s.Label})
		// Who may be routed to changed: the line is served again.
		f.notify(id, statusRead{}, true)
	}
	return s, nil
}

// Remove forgets a worker that is not connected: its view, its drain and
// its relay cursor.
func (f *Fleet) Remove(ctx context.Context, id string) (contract.WorkerSummary, error) {
	f.mu.Lock()
	w, ok := f.workers[id]
	if !ok {
		f.mu.Unlock()
		return contract.WorkerSummary{}, unknownWorker(id)
	}
	if w.link != nil {
		f.mu.Unlock()
		return contract.WorkerSummary{}, contract.Errorf(contract.CodeWorkerConnected,
			"worker %s is connected; stop it (or revoke its token) before removing it", id).With("workerId", id)
	}
	s := w.view.Summary()
	f.mu.Unlock()
	if err := f.opts.Store.DeleteWorker(ctx, id); err != nil {
		return contract.WorkerSummary{}, err
	}
	f.mu.Lock()
	gone := false
	if cur, ok := f.workers[id]; ok && cur == w && w.link == nil {
		delete(f.workers, id)
		f.routes.remove(id)
		gone = true
	}
	f.mu.Unlock()
	f.emit(contract.EvWorkerRemoved, map[string]any{"workerId": id, "label": s.Label, "reason": "operator"})
	if gone {
		f.forgotten(id)
	}
	return s, nil
}

// Prune forgets the workers disconnected for longer than the retention,
// but for drained ones (a drain ends only with undrain or remove).
func (f *Fleet) Prune(ctx context.Context, now time.Time) {
	cutoff := now.Add(-f.opts.Retention).UnixMilli()
	f.mu.Lock()
	var gone []*worker
	for _, w := range f.workers {
		if w.link == nil && !w.view.Drained && w.view.LastSeenAt < cutoff {
			gone = append(gone, w)
		}
	}
	f.mu.Unlock()
	for _, w := range gone {
		if err := f.opts.Store.DeleteWorker(ctx, w.view.ID); err != nil {
			f.log.Warn("could not forget a worker", "workerId", w.view.ID, "err", err)
			continue
		}
		f.mu.Lock()
		gone := false
		if cur, ok := f.workers[w.view.ID]; ok && cur == w && w.link == nil {
			delete(f.workers, w.view.ID)
			f.routes.remove(w.view.ID)
			gone = true
		}
		f.mu.Unlock()
		if gone {
			f.emit(contract.EvWorkerRemoved, map[string]any{"workerId": w.view.ID, "label": w.view.Label, "reason": "retention"})
			f.forgotten(w.view.ID)
		}
	}
}

// CloseToken closes the uplinks opened with a token that was revoked,
// drops their views (what those workers reported is no longer anyone's to
// keep: their lines stay, with their drains and relay cursors, until
// retention or remove), and frees the worker ids it held, so the workers
// can join again with a new token. An uplink of the token still on its
// way to Attach is refused there.
func (f *Fleet) CloseToken(ctx context.Context, tokenID string) {
	f.mu.Lock()
	f.revoked[tokenID] = struct{}{}
	var conns []*link
	var freed []store.Worker
	for _, w := range f.workers {
		switch {
		case w.link != nil && w.tokenID == tokenID:
			w.link.reason = "its join token was revoked"
			w.link.revoked = true
			conns = append(conns, w.link)
		case w.link == nil && (w.owner == tokenID || w.tokenID == tokenID):
			w.view = dropped(w.view)
			w.viewGen++
			f.reindex(w)
		}
		if w.owner == tokenID {
			w.owner = ""
			freed = append(freed, store.Worker{ID: w.view.ID, Label: w.view.Label, Drained: w.view.Drained,
				LastSeq: w.lastSeq, LastSeenAt: w.view.LastSeenAt})
		}
	}
	f.mu.Unlock()
	for _, l := range conns {
		l.conn.Close()
	}
	for _, r := range freed {
		if err := f.opts.Store.PutWorker(ctx, r); err != nil {
			f.log.Warn("could not free a worker id from its revoked token", "workerId", r.ID, "err", err)
		}
	}
}

// Snapshot is the fleet as status and the lists show it: the connected
// workers' records, tagged with their worker, and their capacity summed.
type Snapshot struct {
	Fleet      contract.FleetStatus
	Capacity   contract.Capacity
	Devices    []contract.Device
	Leases     []contract.LeaseRecord
	Waiting    []contract.WaitingRequest
	QueueDepth int
	Installs   []contract.InstallStatus
	Counts     contract.StatusCounts
}

// Snapshot reads the fleet. A worker's records count while it is
// connected; a disconnected worker's last view is not the fleet's present.
func (f *Fleet) Snapshot() Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Snapshot{
		Capacity: contract.Capacity{Strategy: "fleet", Platforms: map[contract.Platform]contract.PlatformCapacity{}},
		Devices:  []contract.Device{}, Leases: []contract.LeaseRecord{}, Waiting: []contract.WaitingRequest{},
		Counts: contract.StatusCounts{DevicesByState: map[contract.DeviceState]int{}},
	}
	ids := make([]string, 0, len(f.workers))
	for id := range f.workers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		w := f.workers[id]
		v := w.view
		s.Fleet.Workers = append(s.Fleet.Workers, v.Summary())
		if v.Drained {
			s.Fleet.Drained++
		}
		switch v.Connection {
		case contract.WorkerConnected:
			s.Fleet.Connected++
		case contract.WorkerIncompatible:
			s.Fleet.Incompatible++
			continue
		default:
			s.Fleet.Disconnected++
			continue
		}
		if c := v.Capacity; c != nil {
			g := &s.Capacity.Global
			g.Running += c.Global.Running
			g.Reserved += c.Global.Reserved
			g.MaxRunning += c.Global.MaxRunning
			g.Warm += c.Global.Warm
			for p, pc := range c.Platforms {
				sum := s.Capacity.Platforms[p]
				sum.Running += pc.Running
				sum.Reserved += pc.Reserved
				sum.MaxRunning += pc.MaxRunning
				sum.Devices += pc.Devices
				sum.MaxDevices += pc.MaxDevices
				sum.Warm += pc.Warm
				s.Capacity.Platforms[p] = sum
			}
		}
		s.Devices = append(s.Devices, v.Devices...)
		s.Leases = append(s.Leases, v.Leases...)
		s.Waiting = append(s.Waiting, v.Waiting...)
		s.QueueDepth += v.QueueDepth
		s.Installs = append(s.Installs, v.Installs...)
	}
	for _, p := range contract.Platforms() {
		if _, ok := s.Capacity.Platforms[p]; !ok {
			s.Capacity.Platforms[p] = contract.PlatformCapacity{}
		}
	}
	sort.SliceStable(s.Installs, func(i, j int) bool { return s.Installs[i].Since < s.Installs[j].Since })
	if len(s.Installs) > 16 {
		s.Installs = s.Installs[:16]
	}
	s.Counts.Devices, s.Counts.Leases, s.Counts.Waiting = len(s.Devices), len(s.Leases), len(s.Waiting)
	for _, d := range s.Devices {
		s.Counts.DevicesByState[d.State]++
	}
	if s.Fleet.Workers == nil {
		s.Fleet.Workers = []contract.WorkerSummary{}
	}
	return s
}

// Catalog is the union of the connected workers' catalogs, with, per
// model and runtime, the workers that have it.
func (f *Fleet) Catalog(platform contract.Platform) contract.CatalogResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	byPlatform := map[contract.Platform]*contract.Catalog{}
	ids := make([]string, 0, len(f.workers))
	for id, w := range f.workers {
		if w.view.Connection == contract.WorkerConnected {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		for _, c := range f.workers[id].view.Catalog {
			if platform != "" && c.Platform != platform {
				continue
			}
			u := byPlatform[c.Platform]
			if u == nil {
				u = &contract.Catalog{Platform: c.Platform, ModelRuntimes: map[string][]string{}, ModelAliases: map[string][]string{},
					ModelClasses: map[string]contract.DeviceClass{}, ClassDefaults: map[contract.DeviceClass][]string{},
					ModelWorkers: map[string][]string{}, RuntimeWorkers: map[string][]string{}}
				byPlatform[c.Platform] = u
			}
			merge(u, c, id)
		}
	}
	res := contract.CatalogResult{Platforms: []contract.Catalog{}}
	for _, p := range contract.Platforms() {
		if u := byPlatform[p]; u != nil {
			res.Platforms = append(res.Platforms, *u)
		}
	}
	return res
}

// merge adds worker id's catalog c to the union u. A model's class and
// aliases come from the first worker (by id) that has it.
func merge(u *contract.Catalog, c contract.Catalog, id string) {
	for _, m := range c.Models {
		if !slices.Contains(u.Models, m) {
			u.Models = append(u.Models, m)
		}
		u.ModelWorkers[m] = appendNew(u.ModelWorkers[m], id)
		if cl, ok := c.ModelClasses[m]; ok {
			if _, seen := u.ModelClasses[m]; !seen {
				u.ModelClasses[m] = cl
			}
		}
		if as, ok := c.ModelAliases[m]; ok {
			if _, seen := u.ModelAliases[m]; !seen {
				u.ModelAliases[m] = slices.Clone(as)
			}
		}
	}
	for _, v := range c.Runtimes {
		if !slices.Contains(u.Runtimes, v) {
			u.Runtimes = append(u.Runtimes, v)
		}
		u.RuntimeWorkers[v] = appendNew(u.RuntimeWorkers[v], id)
	}
	for m, vs := range c.ModelRuntimes {
		for _, v := range vs {
			u.ModelRuntimes[m] = appendNew(u.ModelRuntimes[m], v)
		}
	}
	for cl, ms := range c.ClassDefaults {
		if _, seen := u.ClassDefaults[cl]; !seen {
			u.ClassDefaults[cl] = slices.Clone(ms)
		}
	}
	for _, v := range c.Downloadable {
		u.Downloadable = appendNew(u.Downloadable, v)
	}
	for _, im := range c.Images {
		if !slices.Contains(u.Images, im) {
			u.Images = append(u.Images, im)
		}
	}
	for _, v := range c.SlimRuntimes {
		u.SlimRuntimes = appendNew(u.SlimRuntimes, v)
	}
	// Each worker applies its own default mode; the fleet's catalog names
	// none.
	if u.DefaultRuntime == "" {
		u.DefaultRuntime = c.DefaultRuntime
	}
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// Requests reads the request records of every connected worker now (they
// are not part of a view: a worker keeps thousands), each tagged with its
// worker, in arrival order. A worker that does not answer fails the read,
// naming it (WORKER_UNREACHABLE): a list that left it out would lie.
func (f *Fleet) Requests(ctx context.Context) ([]contract.LeaseRequestRecord, error) {
	type target struct {
		id string
		c  *client.Client
	}
	var ts []target
	f.mu.Lock()
	for id, w := range f.workers {
		if w.view.Connection == contract.WorkerConnected && w.client != nil {
			ts = append(ts, target{id, w.client})
		}
	}
	f.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].id < ts[j].id })
	out := []contract.LeaseRequestRecord{}
	for _, t := range ts {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		res, err := t.c.List(cctx, contract.ListRequests)
		cancel()
		if err != nil {
			return nil, contract.Errorf(contract.CodeWorkerUnreachable, "worker %s did not answer list.get: %v", t.id, err).With("workerId", t.id)
		}
		if len(res.Requests) > maxRecords {
			return nil, contract.Errorf(contract.CodeWorkerUnreachable, "worker %s sent %d request records", t.id, len(res.Requests)).With("workerId", t.id)
		}
		for i, r := range res.Requests {
			if err := checkRequest(fmt.Sprintf("requests[%d]", i), r); err != nil {
				return nil, contract.Errorf(contract.CodeWorkerUnreachable, "worker %s sent an invalid request record: %v", t.id, err).With("workerId", t.id)
			}
			r.WorkerID = t.id
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out, nil
}

// RetryDevice asks the worker a device is on (as the gateway's views know
// it) to retry it now; the worker decides whether it can, and its answer,
// refusal included, is forwarded.
func (f *Fleet) RetryDevice(ctx context.Context, id string) (contract.Device, error) {
	f.mu.Lock()
	var workerID string
	for wid, w := range f.workers {
		for _, d := range w.view.Devices {
			if d.ID == id {
				workerID = wid
			}
		}
	}
	f.mu.Unlock()
	if workerID == "" {
		return contract.Device{}, contract.Errorf(contract.CodeUnknownDevice, "no worker of this gateway reports device %s", id).With("deviceId", id)
	}
	c := f.clientOf(workerID)
	if c == nil {
		return contract.Device{}, contract.Errorf(contract.CodeWorkerUnreachable, "worker %s, which has device %s, is not connected", workerID, id).
			With("workerId", workerID).With("deviceId", id)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var res contract.DeviceRetryResult
	if err := c.Call(cctx, contract.OpDeviceRetry, contract.DeviceIDInput{DeviceID: id}, &res); err != nil {
		ce, _ := forwardError(cctx, workerID, "the retry", err)
		return contract.Device{}, ce
	}
	if err := checkDevice("device", res.Device); err != nil {
		return contract.Device{}, contract.Errorf(contract.CodeInternal, "worker %s answered the retry of %s with an invalid device: %v", workerID, id, err)
	}
	res.Device.WorkerID = workerID
	return res.Device, nil
}

// workerNames are the fleet's workers as a lease record names them: by id,
// their label and whether they are connected now.
type workerNames map[string]workerName

type workerName struct {
	label     string
	connected bool
}

// ref is the worker of a lease record, {id, label}; nil for "" (a record
// that is on no worker).
func (ws workerNames) ref(id string) *contract.WorkerRef {
	if id == "" {
		return nil
	}
	return &contract.WorkerRef{ID: id, Label: ws[id].label}
}

// names reads every worker's label and connection, for the lease records
// of one answer.
func (f *Fleet) names() workerNames {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(workerNames, len(f.workers))
	for id, w := range f.workers {
		out[id] = workerName{label: w.view.Label, connected: w.view.Connection == contract.WorkerConnected}
	}
	return out
}

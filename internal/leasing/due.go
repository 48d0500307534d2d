package leasing

import (
	"container/heap"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
)

// dueHeap orders one platform's active leases by TTL deadline, so the lease
// due to end soonest (what a queued request waits on) is known without a
// scan: O(log n) per grant, renewal and end.
type dueHeap []*lease

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].TTLDeadline != h[j].TTLDeadline {
		return h[i].TTLDeadline < h[j].TTLDeadline
	}
	return h[i].UniqueKey() < h[j].UniqueKey()
}
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].due, h[j].due = i, j
}
func (h *dueHeap) Push(x any) {
	l := x.(*lease)
	l.due = len(*h)
	*h = append(*h, l)
}
func (h *dueHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.due = -1
	return l
}

// dueAdd files an active lease of platform p. A platform this build does
// not know (a stored row is a claim) files nothing: the lease just never
// shows as what a queued request waits on.
func (e *Engine) dueAdd(l *lease, p contract.Platform) {
	if l.plat = p.Index(); l.plat < 0 {
		return
	}
	heap.Push(&e.due[l.plat], l)
}

// dueRemove forgets an ended lease.
func (e *Engine) dueRemove(l *lease) {
	if l.due >= 0 {
		heap.Remove(&e.due[l.plat], l.due)
	}
}

// dueMoved re-files a lease whose deadline changed, and reports whether it
// is, or was, its platform's soonest: what a queued request is told changes.
func (e *Engine) dueMoved(l *lease) bool {
	if l.due < 0 {
		return false
	}
	was := l.due == 0
	heap.Fix(&e.due[l.plat], l.due)
	return was || l.due == 0
}

// soonestDue is the active lease of the platforms ps due to end soonest.
func (e *Engine) soonestDue(ps ...contract.Platform) *lease {
	var first *lease
	for _, p := range ps {
		h := e.due[p.Index()]
		if len(h) == 0 {
			continue
		}
		if l := h[0]; first == nil || l.TTLDeadline < first.TTLDeadline || (l.TTLDeadline == first.TTLDeadline && l.UniqueKey() < first.UniqueKey()) {
			first = l
		}
	}
	return first
}

// queueWait is what the first in line for platform p waits for, given the
// limit that blocks it: the limit's use and size, and the lease under it
// due to end soonest.
func (e *Engine) queueWait(p contract.Platform, block core.Block) *contract.LeaseProgress {
	lim, u := e.opts.Limits, e.reg.use
	w := contract.QueueWait{}
	scope := []contract.Platform{p}
	switch block {
	case core.BlockPlatformRunning:
		w.Limit, w.InUse, w.Max = contract.WaitPlatformRunning, u.Running.Of(p)+u.Reserved.Of(p), lim.Platforms[p].MaxRunning
	case core.BlockDeviceLimit:
		w.Limit, w.InUse, w.Max = contract.WaitDevices, u.Devices.Of(p), lim.Platforms[p].MaxDevices
	case core.BlockGlobalRunning:
		w.Limit, w.InUse, w.Max = contract.WaitMachineRunning, u.TotalRunning(), lim.MaxRunning
		scope = contract.Platforms()
	case core.BlockRAM:
		w.Limit, w.InUse, w.Max = contract.WaitRAM, int(u.RAMBytes>>20), int(lim.RAM.LimitBytes>>20)
		scope = contract.Platforms()
	default:
		return nil
	}
	if l := e.soonestDue(scope...); l != nil {
		// By its key: the id its owner chose is the owner's alone.
		w.LeaseID, w.Holder, w.EndsAt = l.UniqueKey(), l.RequesterID, l.TTLDeadline
	}
	return &contract.LeaseProgress{Stage: contract.StageQueued, Wait: &w}
}

package daemon

import "github.com/simlock/simlock/internal/contract"

// maxNotices bounds the health notices kept for one lease until its next
// renew: a device that crashes and recovers over and over while nobody
// renews keeps the latest only.
const maxNotices = 8

// keepNotice keeps p, a health notice of the lease with key key that no
// session heard, for the lease's next renew. d.mu must be held.
func (d *Daemon) keepNotice(key string, p contract.Push) {
	if d.notices == nil {
		d.notices = map[string][]contract.Push{}
	}
	ns := append(d.notices[key], p)
	if len(ns) > maxNotices {
		ns = ns[len(ns)-maxNotices:]
	}
	d.notices[key] = ns
}

// renewed tells s, whose renew of l just succeeded, the health notices of
// l that no session heard when they happened, in order, once: the renew is
// then how a holder with no session between its calls (an HTTP agent)
// hears of a crash or a recovery. It is the one path on a worker and on a
// gateway, whose DeviceHealth callback is deviceHealth too.
func (d *Daemon) renewed(s *session, l contract.LeaseRecord) {
	if !s.mayHold(l) {
		return
	}
	d.mu.Lock()
	ns := d.notices[l.UniqueKey()]
	delete(d.notices, l.UniqueKey())
	d.mu.Unlock()
	for _, p := range ns {
		s.push(p)
	}
}

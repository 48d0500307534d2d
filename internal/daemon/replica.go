package daemon

import (
	"sync"
	"sync/atomic"

	"github.com/simlock/simlock/internal/contract"
)

// replica is a gateway's place among the replicas that share its
// PostgreSQL database: one leads (elected through the database) and
// serves; the others follow. On any other daemon (a worker, a gateway on
// SQLite) it is off, and the daemon serves as it always has.
//
// The leader's machinery (the fleet, its queue, the lease port) is set
// before leading is stored, and read by the serving paths only after they
// loaded leading as true: the atomic orders the two.
type replica struct {
	on      bool // set before the daemon serves; read-only after
	leading atomic.Bool

	mu   sync.Mutex
	info contract.Leadership // guarded by mu
}

// enabled reports whether the daemon is a gateway replica.
func (r *replica) enabled() bool { return r.on }

// serves reports whether the daemon serves its operations itself: any
// daemon that is not a replica, and the replica that leads.
func (r *replica) serves() bool { return !r.on || r.leading.Load() }

// leadership is who leads, as this replica last saw it; ok is false on a
// daemon that is not a replica.
func (r *replica) leadership() (info contract.Leadership, ok bool) {
	if !r.on {
		return contract.Leadership{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.info, true
}

// see records who leads, as read from the database.
func (r *replica) see(info contract.Leadership) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.info = info
}

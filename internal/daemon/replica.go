package daemon

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leader"
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
	// won is the last term the elector won (0 before any); a deposition
	// of another term is not this replica's.
	won atomic.Int64
	// wg counts the elector, its watch and a leader's startup: Stop waits
	// for them before it reads what they set.
	wg sync.WaitGroup

	mu   sync.Mutex
	info contract.Leadership // guarded by mu
	// err is why the replica stopped itself: deposed (wrapping
	// leader.ErrDeposed) or failed to start as leader; guarded by mu.
	err error
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

// depose records that the replica lost its term; it reports whether this
// is the first reason to stop.
func (r *replica) depose(err error) bool { return r.fail(err) }

// fail records why the replica stops itself; the first reason is kept,
// and fail reports whether it was this one.
func (r *replica) fail(err error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return false
	}
	r.err = err
	return true
}

// stopErr is why the replica stopped itself, nil when it did not.
func (r *replica) stopErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// deposed reports whether the replica stopped itself because it lost its
// term: it runs again, as a follower.
func (r *replica) deposed() bool { return errors.Is(r.stopErr(), leader.ErrDeposed) }

package gateway

import (
	"sync"

	"github.com/simlock/simlock/internal/contract"
)

// maxExecBacklog bounds the output of one forwarded command that may wait
// for its caller: past it the caller reads too slowly to be served, and
// the gateway stops relaying to it.
const maxExecBacklog = 8 << 20

// execRelay hands a forwarded command's started signal and output to its
// caller in order, from a goroutine of its own. They arrive on the uplink's
// read loop, which every call to that worker shares, and a caller's push
// may wait for the caller (an HTTP client that reads slowly): the loop must
// never wait with it, or one slow reader would stall the whole worker's
// uplink until its heartbeat gave up. What waits is bounded by
// maxExecBacklog; past it, overflow is called once and nothing more is
// kept.
type execRelay struct {
	started  func()
	output   func(contract.ExecOutput)
	overflow func()

	mu      sync.Mutex
	pending []relayed
	bytes   int
	over    bool
	closed  bool
	wake    chan struct{}
	drained chan struct{}
}

// relayed is one thing to hand on: the started signal, or a chunk.
type relayed struct {
	started bool
	out     contract.ExecOutput
}

func newExecRelay(started func(), output func(contract.ExecOutput), overflow func()) *execRelay {
	r := &execRelay{started: started, output: output, overflow: overflow,
		wake: make(chan struct{}, 1), drained: make(chan struct{})}
	go r.run()
	return r
}

// start and add queue the started signal and a chunk; they never wait.
func (r *execRelay) start() { r.put(relayed{started: true}) }

func (r *execRelay) add(o contract.ExecOutput) { r.put(relayed{out: o}) }

func (r *execRelay) put(x relayed) {
	r.mu.Lock()
	if r.over || r.closed {
		r.mu.Unlock()
		return
	}
	r.bytes += len(x.out.Chunk)
	if r.bytes > maxExecBacklog {
		r.over, r.pending = true, nil
		r.mu.Unlock()
		r.overflow()
		return
	}
	r.pending = append(r.pending, x)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// overflowed reports whether the caller fell maxExecBacklog behind.
func (r *execRelay) overflowed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.over
}

// close takes nothing more and returns once what was queued was handed
// on (every push of a call comes before its answer).
func (r *execRelay) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	<-r.drained
}

func (r *execRelay) run() {
	defer close(r.drained)
	for {
		r.mu.Lock()
		for len(r.pending) == 0 && !r.closed && !r.over {
			r.mu.Unlock()
			<-r.wake
			r.mu.Lock()
		}
		if r.over || len(r.pending) == 0 {
			r.mu.Unlock()
			return
		}
		x := r.pending[0]
		r.pending = r.pending[1:]
		r.mu.Unlock()
		switch {
		case x.started && r.started != nil:
			r.started()
		case !x.started:
			r.output(x.out)
		}
		r.mu.Lock()
		r.bytes -= len(x.out.Chunk)
		r.mu.Unlock()
	}
}

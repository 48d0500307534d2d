package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/queue"
)

// session is one caller of the dispatcher: a socket connection once it has
// said hello, or one HTTP request acting for its bearer token. Its role and
// principal are fixed; it lives until ctx ends.
type session struct {
	d         *Daemon
	ctx       context.Context
	role      contract.Role
	principal string
	// push delivers a frame the session did not ask for; it must not block
	// for long (device.exec output is the exception: it may, which slows
	// the command's output down to the reader's pace).
	push func(contract.Push)
	// end closes the session, when it cannot keep up with its pushes.
	end func()

	// gateway: the session is the uplink of the gateway this worker's
	// config names, the one caller whose lease requests may name an owner.
	gateway bool
	// remote: the session acts for a caller that is not on this machine
	// (an HTTP request, a gateway's uplink) or said in its hello that it
	// must be treated as one (simlock mcp does): its device commands may
	// not name files of this machine, and it gets no passthrough command
	// to run here.
	remote bool

	mu      sync.Mutex
	subs    map[string]func()
	nextSub int
}

func newSession(d *Daemon, ctx context.Context, role contract.Role, principal string, push func(contract.Push), end func()) *session {
	if push == nil {
		push = func(contract.Push) {}
	}
	return &session{d: d, ctx: ctx, role: role, principal: principal, push: push, end: end, subs: map[string]func(){}}
}

// dispatch runs one operation for the session: role check, the reserved
// requester ids, a follower's NOT_LEADER, parking until startup is done, then the operation's entry
// in the table (table.go), which refuses it in a mode that has not got it,
// decodes its input strictly and runs its handler. Every frontend (the
// socket, a gateway's uplink, HTTP) goes through here; this is the only
// place the rules live. id is the caller's id for the call, echoed on its
// pushes. ctx is the call's own:
// it ends with the session, or when the caller cancels the call
// (call.cancel); an operation that runs something for its caller
// (device.exec) stops it then.
func (s *session) dispatch(ctx context.Context, id json.RawMessage, op contract.Op, raw json.RawMessage) (any, error) {
	info, known := contract.LookupOp(op)
	if !known {
		return nil, contract.Errorf(contract.CodeUnknownRequest, "unknown operation %q", contract.Clip(string(op))).With("op", contract.Clip(string(op)))
	}
	if op == contract.OpHello {
		return nil, contract.Errorf(contract.CodeBadRequest, "hello was already sent on this connection")
	}
	if info.AdminOnly && s.role != contract.RoleAdmin {
		return nil, contract.Errorf(contract.CodeForbidden, "%s needs the admin role", op).With("op", op)
	}
	if err := reservedRequesterIn(s.gateway, raw); err != nil {
		return nil, err
	}
	// A gateway replica that does not lead has none of the gateway's
	// parts: what needs them is the leader's (follower.go).
	if err := s.d.followerRefusal(op); err != nil {
		return nil, err
	}
	if !info.Early {
		// Once startup has converged, the mode's parts (the engine, or
		// the fleet and its queue) and the lease port are set.
		if err := s.awaitStartup(); err != nil {
			return nil, err
		}
	}
	e, ok := s.d.ops[op]
	if !ok {
		return nil, contract.Errorf(contract.CodeUnknownRequest, "operation %q has no handler", op)
	}
	c := &call{s: s, d: s.d, ctx: ctx, id: id, op: op,
		caller: queue.Caller{Principal: s.principal, Admin: s.role == contract.RoleAdmin}}
	return e.run(c, s.d.mode(), raw)
}

// onBehalf is the caller a lease request acts as: the owner it names,
// when the session is its gateway's uplink (the gateway authorized that
// owner itself); the session's own principal otherwise. An owner named by
// anyone else is FORBIDDEN, whatever their role. The owner is taken out of
// the input: the engine knows only the caller.
func (s *session) onBehalf(c leasing.Caller, in *contract.LeaseRequestInput) (leasing.Caller, error) {
	if in.Owner == "" {
		return c, nil
	}
	if !s.gateway {
		return c, contract.Errorf(contract.CodeForbidden, "owner is named only by a worker's gateway, over its uplink").With("field", "owner")
	}
	c.Principal, in.Owner = in.Owner, ""
	return c, nil
}

// awaitStartup parks the call until startup has converged, or the session
// ends. A failed startup is DAEMON_STARTUP_FAILED with its reason: every call
// that needs the engine gets it, and so does status.get with waitReady,
// whose caller asked for a daemon that is ready.
func (s *session) awaitStartup() error {
	select {
	case <-s.d.ready:
	case <-s.ctx.Done():
		return contract.Errorf(contract.CodeDaemonConnectionLost, "connection closed")
	}
	if s.d.startErr != nil {
		return contract.Errorf(contract.CodeDaemonStartupFailed, "daemon startup failed: %v", s.d.startErr)
	}
	return nil
}

// stopResult answers daemon.stop, then starts the stop.
type stopResult struct{ d *Daemon }

func (s stopResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(contract.DaemonStopResult{Stopping: true})
}
func (s stopResult) afterSend() { s.d.requestStop() }

// subscription answers events.subscribe and starts pushing once sent.
type subscription struct {
	s   *session
	res contract.EventsSubscribeResult
	run func()
}

func (s subscription) MarshalJSON() ([]byte, error) { return json.Marshal(s.res) }
func (s subscription) afterSend()                   { go s.run() }

func (s *session) subscribe() subscription {
	sub, last := s.d.bus.Subscribe(4096)
	s.mu.Lock()
	s.nextSub++
	id := fmt.Sprintf("sub_%d", s.nextSub)
	s.subs[id] = sub.Close
	s.mu.Unlock()
	run := func() {
		defer sub.Close()
		for {
			select {
			case <-s.ctx.Done():
				return
			case ev, ok := <-sub.C():
				if !ok {
					if sub.Lagged() {
						s.d.log.Warn("event subscriber fell behind; ending its session")
						s.end()
					}
					return
				}
				s.push(contract.Push{Push: contract.PushEvent, SubscriptionID: id, Event: &ev})
			}
		}
	}
	return subscription{s: s, res: contract.EventsSubscribeResult{SubscriptionID: id, LastSeq: last}, run: run}
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simlock/simlock/internal/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/gateway"
	"github.com/simlock/simlock/internal/simworker"
	"github.com/simlock/simlock/internal/uplink"
)

// The fleet at scale: a gateway (`simlock daemon run`, SQLite) and N
// simulated workers (internal/simworker) in the bench's process, for each
// N of --workers.
const (
	// simAgents are the agent sessions the waiting requests are made
	// over, each by simCreators goroutines at once.
	simAgents   = 8
	simCreators = 4
	// simRedial is how long a worker whose uplink could not be made
	// waits before it dials again.
	simRedial = 50 * time.Millisecond
	// simJoinAtOnce bounds the workers that dial at once on the first
	// join (the storm dials all of them at once).
	simJoinAtOnce = 50
	// simEventsTotal is how many events the workers push between them in
	// the relayed-events row, each at most simEventsPerWorker: below the
	// burst a gateway relays of one worker (relayBurst in
	// internal/gateway/relaylimits.go, 5,000), so none is dropped for its
	// rate.
	simEventsTotal     = 20_000
	simEventsPerWorker = 2_000
	// simEventsOffered is the rate, a second, the workers push them at
	// between them, evenly: a subscriber falling a whole buffer (4,096
	// events) behind the gateway's events is cut off, and a burst of
	// all at once would measure that instead.
	simEventsOffered = 10_000.0
	// simTick is how often a worker pushes its share of events.
	simTick = 10 * time.Millisecond
	// simMaxFreeRate is the most leases the workers end a second between
	// them in the grants-per-second row.
	simMaxFreeRate = 2_500
	// simLeaseAge is the youngest lease the workers end in the
	// grants-per-second row: an expiry comes at a lease's TTL, and a
	// lease ended as it is granted would measure a race no fleet runs.
	simLeaseAge = 100 * time.Millisecond
	// simQuiet ends a count of pushed events that has had none for this
	// long.
	simQuiet = 2 * time.Second
)

// fleetRun is one N's rows; the JSON names are stable.
type fleetRun struct {
	Workers          int       `json:"workers"`
	DevicesPerWorker int       `json:"devicesPerWorker"`
	Route            benchStat `json:"route"`
	GatewayWarmGrant benchStat `json:"gatewayWarmGrant"`
	DirectWarmGrant  benchStat `json:"directWarmGrant"`
	UplinkRoundTrip  benchStat `json:"uplinkRoundTrip"`
	GrantsPerSecond  float64   `json:"grantsPerSecond"`
	// Grants were counted over WindowMs while the workers freed devices
	// at FreeRate a second, with Waiting requests in line at its start.
	Grants   int     `json:"grants"`
	WindowMs float64 `json:"windowMs"`
	FreeRate int     `json:"freeRate"`
	Waiting  int     `json:"waiting"`
	// RSS figures: the gateway's RSS deltas, per worker and per waiting
	// request.
	RSSPerWorkerKiB  float64 `json:"rssPerWorkerKiB"`
	RSSPerWaitingKiB float64 `json:"rssPerWaitingKiB"`
	ReconnectStormMs float64 `json:"reconnectStormMs"`
	EventsPerSecond  float64 `json:"eventsPerSecond"`
	// Events is how many relayed events the subscriber counted, of
	// EventsPushed the workers pushed.
	Events       int `json:"events"`
	EventsPushed int `json:"eventsPushed"`
	// UplinkRedials counts the uplinks the workers dialled again after the
	// gateway dropped one, outside the storm (a worker it took for
	// silent, say).
	UplinkRedials int64 `json:"uplinkRedials"`
}

// simFleet is one run's gateway and workers.
type simFleet struct {
	env     Env
	plan    FleetPlan
	n       int
	dir     string
	gwHome  string
	url     string
	gw      *benchDaemon
	admin   *client.Client
	workers []*simworker.Worker
	tokens  []string

	// unlink, called, tells the workers' keepers (goroutines, one a
	// worker) to close their uplinks and return.
	unlink  context.CancelFunc
	keepers sync.WaitGroup
	// redials counts the uplinks the workers dialled again after one
	// ended under them (the gateway dropped it), as a worker does.
	redials atomic.Int64

	// timed is the uplink of the first worker, whose round trip is timed
	// beside the warm grants through the gateway (measureGatewayGrant).
	timed atomic.Pointer[uplink.Conn]
}

type simLink struct {
	conn *uplink.Conn
	done <-chan struct{}
}

// benchSimRun measures one N in dir.
func benchSimRun(ctx context.Context, env Env, dir string, n int, plan FleetPlan, note func(string, ...any)) (run fleetRun, err error) {
	run = fleetRun{Workers: n, DevicesPerWorker: plan.Devices, Waiting: plan.Waiting}
	f := &simFleet{env: env, plan: plan, n: n, dir: dir, gwHome: filepath.Join(dir, "gw")}
	defer func() {
		if serr := f.close(ctx); serr != nil && err == nil {
			err = serr
		}
	}()

	note("%d workers: starting the gateway", n)
	if err := f.startGateway(ctx); err != nil {
		return run, err
	}
	before, err := settledRSSKiB(ctx, f.gw.pid())
	if err != nil {
		return run, err
	}
	note("%d workers: making %d join tokens", n, n)
	if err := f.makeTokens(ctx); err != nil {
		return run, err
	}
	note("%d workers: joining %d simulated workers of %d devices", n, n, plan.Devices)
	for i := range n {
		f.workers = append(f.workers, simworker.New(simworker.Options{ID: simWorkerID(i), Devices: plan.Devices}))
	}
	if err := f.joinAll(ctx, simJoinAtOnce); err != nil {
		return run, err
	}
	if err := waitWorkersConnected(ctx, f.admin, n); err != nil {
		return run, err
	}
	after, err := settledRSSKiB(ctx, f.gw.pid())
	if err != nil {
		return run, err
	}
	run.RSSPerWorkerKiB = round2(float64(after-before) / float64(n))

	note("%d workers: routing decisions", n)
	if run.Route, err = f.measureRoute(ctx); err != nil {
		return run, err
	}
	note("%d workers: warm grant on one simulated worker directly", n)
	if run.DirectWarmGrant, err = f.measureDirect(ctx); err != nil {
		return run, err
	}
	note("%d workers: warm grant through the gateway, and the uplink's round trip", n)
	if run.GatewayWarmGrant, run.UplinkRoundTrip, err = f.measureGatewayGrant(ctx); err != nil {
		return run, err
	}
	note("%d workers: relayed events", n)
	if run.EventsPerSecond, run.Events, run.EventsPushed, err = f.measureEvents(ctx); err != nil {
		return run, err
	}
	note("%d workers: %d waiting requests, grants per second", n, plan.Waiting)
	if err := f.measureGrants(ctx, &run); err != nil {
		return run, err
	}
	run.UplinkRedials = f.redials.Load()
	note("%d workers: reconnect storm", n)
	if run.ReconnectStormMs, err = f.measureStorm(ctx); err != nil {
		return run, err
	}
	return run, nil
}

func simWorkerID(i int) string { return fmt.Sprintf("sim-%04d", i+1) }

// startGateway writes the gateway's config and starts it.
func (f *simFleet) startGateway(ctx context.Context) error {
	port, err := freeLoopbackPort()
	if err != nil {
		return err
	}
	f.url = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := writeFleetConfig(f.gwHome, [][2]string{
		{"mode", "gateway"}, {"gateway.store", config.StoreSQLite},
		{"http.enabled", "true"}, {"http.port", strconv.Itoa(port)},
		{"gateway.maxWorkers", strconv.Itoa(max(f.n, 1))},
		// The waiting requests and the grants of the window are kept.
		{"lease.maxRequestRecords", strconv.Itoa(max(10_000, 3*f.plan.Waiting))},
	}); err != nil {
		return err
	}
	gw, first, err := startAndWait(ctx, f.env, f.gwHome, 0)
	if err != nil {
		return err
	}
	first.Close()
	f.gw = gw
	if f.admin, err = gw.dial(ctx, true); err != nil {
		return benchError("connect", err)
	}
	return waitLeading(ctx, f.admin)
}

// makeTokens makes one join token per worker: a gateway binds a worker id
// to the token it first joined with.
func (f *simFleet) makeTokens(ctx context.Context) error {
	for i := range f.n {
		var tok contract.TokenCreateResult
		if _, err := bounded(ctx, "token.create", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, f.admin.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenWorker, Label: simWorkerID(i)}, &tok)
		}); err != nil {
			return err
		}
		f.tokens = append(f.tokens, tok.Secret)
	}
	return nil
}

// joinAll dials every worker's uplink, at most atOnce at a time, each
// retrying within benchStartBound while the gateway refuses it for not
// serving yet; each worker then keeps its uplink, dialling again when the
// gateway drops it, until dropLinks.
func (f *simFleet) joinAll(ctx context.Context, atOnce int) error {
	if f.unlink != nil {
		return errors.New("bench: the workers are joined already")
	}
	lctx, unlink := context.WithCancel(ctx)
	f.unlink = unlink
	sem := make(chan struct{}, atOnce)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i, w := range f.workers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			opts := uplink.Options{}
			l, err := f.join(lctx, w, f.tokens[i], opts)
			if err != nil {
				once.Do(func() { first = err })
				return
			}
			f.keepers.Go(func() { f.keep(lctx, w, f.tokens[i], opts, l) })
		})
	}
	wg.Wait()
	return first
}

// keep keeps w's uplink l until ctx ends, dialling again when it ends
// under the worker.
func (f *simFleet) keep(ctx context.Context, w *simworker.Worker, token string, opts uplink.Options, l simLink) {
	for {
		select {
		case <-ctx.Done():
			l.conn.Close()
			<-l.done
			return
		case <-l.done:
		}
		if ctx.Err() != nil {
			return
		}
		f.redials.Add(1)
		var err error
		if l, err = f.join(ctx, w, token, opts); err != nil {
			return
		}
	}
}

// join dials one worker's uplink, again while the gateway is not up or
// not serving yet.
func (f *simFleet) join(ctx context.Context, w *simworker.Worker, token string, opts uplink.Options) (simLink, error) {
	ctx, cancel := context.WithTimeout(ctx, benchStartBound)
	defer cancel()
	for {
		conn, done, err := w.Join(ctx, f.url, token, opts)
		if err == nil {
			if w == f.workers[0] {
				f.timed.Store(conn)
			}
			return simLink{conn: conn, done: done}, nil
		}
		var re *uplink.RefusedError
		if errors.As(err, &re) && re.Code != contract.CodeDaemonStartupFailed && re.Code != contract.CodeDaemonConnectionLost && re.Status < 500 {
			return simLink{}, contract.Errorf(contract.CodeInternal, "bench: the gateway refused simulated worker %s: %v", w.ID(), err)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return simLink{}, contract.Errorf(contract.CodeInternal, "bench: simulated worker %s could not join within %s: %v", w.ID(), benchStartBound, err)
			}
			return simLink{}, ctx.Err()
		case <-time.After(simRedial):
		}
	}
}

// dropLinks closes the workers' uplinks and waits, within benchStopBound,
// for their keepers.
func (f *simFleet) dropLinks() error {
	if f.unlink == nil {
		return nil
	}
	f.unlink()
	f.unlink = nil
	done := make(chan struct{})
	go func() {
		f.keepers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(benchStopBound):
		return contract.Errorf(contract.CodeInternal, "bench: simulated workers' uplinks did not end within %s", benchStopBound)
	}
}

// close ends the workers' uplinks, then stops the gateway.
func (f *simFleet) close(ctx context.Context) error {
	err := f.dropLinks()
	if f.admin != nil {
		f.admin.Close()
	}
	if f.gw != nil {
		if serr := f.gw.stop(ctx); serr != nil && err == nil {
			err = serr
		}
	}
	return err
}

// views reads every worker's view from the gateway, devices included.
func (f *simFleet) views(ctx context.Context) ([]*contract.WorkerView, error) {
	out := make([]*contract.WorkerView, 0, f.n)
	for _, w := range f.workers {
		v, err := bounded(ctx, "worker.get", func(ctx context.Context) (*contract.WorkerView, error) {
			var v contract.WorkerView
			err := f.admin.Call(ctx, contract.OpWorkerGet, contract.WorkerIDInput{WorkerID: w.ID()}, &v)
			return &v, err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// measureRoute times routing decisions of a warm ask over the views the
// gateway reports, with every device of every worker leased but the last
// worker's last: a decision that reads every device before it finds one.
func (f *simFleet) measureRoute(ctx context.Context) (benchStat, error) {
	vs, err := f.views(ctx)
	if err != nil {
		return benchStat{}, err
	}
	for i, v := range vs {
		for j := range v.Devices {
			if i < len(vs)-1 || j < len(v.Devices)-1 {
				v.Devices[j].State, v.Devices[j].LeaseID = contract.DeviceLeased, "bench"
			}
		}
	}
	ds, err := gateway.TimeRoutes(vs, gateway.Ask{Platform: contract.PlatformAndroid}, f.plan.Samples+benchWarmup)
	if err != nil {
		return benchStat{}, contract.Errorf(contract.CodeInternal, "bench: routing over the gateway's views: %v", err)
	}
	return summarize(ds[benchWarmup:]), nil
}

// measureDirect times a warm grant on one simulated worker of its own, on
// its unix socket, releasing each (untimed).
func (f *simFleet) measureDirect(ctx context.Context) (benchStat, error) {
	w := simworker.New(simworker.Options{ID: "sim-direct", Devices: f.plan.Devices})
	sock := filepath.Join(f.dir, "direct.sock")
	l, err := w.Listen(sock)
	if err != nil {
		return benchStat{}, err
	}
	defer l.Close()
	cctx, cancel := context.WithTimeout(ctx, benchCallBound)
	c, err := client.Dial(cctx, sock, contract.HelloInput{Client: "simlock-bench", Principal: benchPrincipal})
	cancel()
	if err != nil {
		return benchStat{}, benchError("connect", err)
	}
	defer c.Close()
	return warmGrants(ctx, c, f.plan.Samples, nil)
}

// measureGatewayGrant times a warm grant through the gateway, each
// released (untimed) and waited for until the gateway's view of its
// worker shows every device idle again.
func (f *simFleet) measureGatewayGrant(ctx context.Context) (grant, uplinkRTT benchStat, err error) {
	c, err := f.gw.dial(ctx, false)
	if err != nil {
		return benchStat{}, benchStat{}, benchError("connect", err)
	}
	defer c.Close()
	conn := f.timed.Load()
	if conn == nil {
		return benchStat{}, benchStat{}, contract.Errorf(contract.CodeInternal, "bench: the first simulated worker has no uplink")
	}
	rtts := make([]time.Duration, 0, f.plan.Samples)
	grant, err = warmGrants(ctx, c, f.plan.Samples, func(ctx context.Context, g contract.LeaseGrant) error {
		if err := pollUntil(ctx, "the released device idle in the gateway's view", func(ctx context.Context) (bool, error) {
			var v contract.WorkerView
			if err := f.admin.Call(ctx, contract.OpWorkerGet, contract.WorkerIDInput{WorkerID: g.Device.WorkerID}, &v); err != nil {
				return false, benchError("worker.get", err)
			}
			return v.Capacity != nil && v.Capacity.Global.Warm == f.plan.Devices, nil
		}); err != nil {
			return err
		}
		// The uplink's own round trip, between the grants: under the
		// load they are timed under, not that of another phase.
		rtt, err := bounded(ctx, "uplink ping", conn.Ping)
		if err != nil {
			return err
		}
		rtts = append(rtts, rtt)
		return nil
	})
	return grant, summarize(rtts), err
}

// measureEvents has every worker push its share of simEventsTotal
// queue.changed events at once and counts, as a subscriber of the
// gateway's events, those relayed, from the first to the last: relayed
// events a second. It returns the rate, the count and how many were
// pushed.
func (f *simFleet) measureEvents(ctx context.Context) (float64, int, int, error) {
	sub, err := f.gw.dial(ctx, true)
	if err != nil {
		return 0, 0, 0, benchError("connect", err)
	}
	defer sub.Close()
	cctx, cancel := context.WithTimeout(ctx, benchCallBound)
	events, _, err := sub.Subscribe(cctx)
	cancel()
	if err != nil {
		return 0, 0, 0, benchError("events.subscribe", err)
	}
	per := min(simEventsPerWorker, max(1, simEventsTotal/f.n))
	pushed := per * f.n
	spread := time.Duration(float64(pushed) / simEventsOffered * float64(time.Second))
	stop := make(chan struct{})
	defer close(stop)
	for _, w := range f.workers {
		go emitSpread(w, per, spread, stop)
	}
	bound := time.After(benchStartBound)
	var first, last time.Time
	count := 0
	for count < pushed {
		select {
		case ev, ok := <-events:
			if !ok {
				// Cut off for falling a buffer behind the gateway's
				// events: what was counted until then stands.
				return rate(count, last.Sub(first)), count, pushed, nil
			}
			if ev.Event != contract.EvQueueChanged {
				continue
			}
			last = time.Now()
			if count == 0 {
				first = last
			}
			count++
		case <-time.After(simQuiet):
			if count == 0 {
				return 0, 0, pushed, contract.Errorf(contract.CodeInternal, "bench: no relayed event within %s", simQuiet)
			}
			return rate(count, last.Sub(first)), count, pushed, nil
		case <-bound:
			return rate(count, last.Sub(first)), count, pushed, nil
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		}
	}
	return rate(count, last.Sub(first)), count, pushed, nil
}

// emitSpread has w push n queue.changed events evenly over spread, a few
// every simTick, until done or stop.
func emitSpread(w *simworker.Worker, n int, spread time.Duration, stop <-chan struct{}) {
	ticks := max(1, int(spread/simTick))
	tick := time.NewTicker(simTick)
	defer tick.Stop()
	sent := 0
	for i := 1; sent < n; i++ {
		due := min(n, (n*i+ticks-1)/ticks)
		w.Emit(contract.EvQueueChanged, map[string]any{"depth": 0}, due-sent)
		sent = due
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// rate is n a second over d (n itself over less than a millisecond).
func rate(n int, d time.Duration) float64 {
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return round2(float64(n) / d.Seconds())
}

// measureGrants leases every device on its worker (its own agents hold
// them), puts plan.Waiting requests in the gateway's line, and then has
// the workers end leases at a steady rate, as expiries, and counts the
// grants over a window: the requests that left the gateway's line (none
// times out or is cancelled), as its status counts them.
func (f *simFleet) measureGrants(ctx context.Context, run *fleetRun) error {
	total := 0
	for _, w := range f.workers {
		total += w.Occupy()
	}
	leased := 0
	if err := pollUntil(ctx, "every device leased in the gateway's views", func(ctx context.Context) (bool, error) {
		var ws contract.WorkerListResult
		if err := f.admin.Call(ctx, contract.OpWorkerList, struct{}{}, &ws); err != nil {
			return false, benchError("worker.list", err)
		}
		leased = 0
		for _, w := range ws.Workers {
			leased += w.Leases
		}
		return leased >= f.n*f.plan.Devices, nil
	}); err != nil {
		return fmt.Errorf("%w (%d of %d leased)", err, leased, f.n*f.plan.Devices)
	}
	before, err := settledRSSKiB(ctx, f.gw.pid())
	if err != nil {
		return err
	}
	if err := f.makeWaiting(ctx); err != nil {
		return err
	}
	after, err := settledRSSKiB(ctx, f.gw.pid())
	if err != nil {
		return err
	}
	run.RSSPerWaitingKiB = round2(float64(after-before) / float64(f.plan.Waiting))

	freeRate := min(simMaxFreeRate, max(10, f.plan.Waiting/2))
	window := time.Duration(float64(f.plan.Waiting) * 0.8 / float64(freeRate) * float64(time.Second))
	run.FreeRate = freeRate

	t0, w0, err := f.waitingNow(ctx)
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	freed := make(chan struct{})
	go func() {
		defer close(freed)
		f.free(ctx, freeRate, stop)
	}()
	select {
	case <-time.After(window):
	case <-ctx.Done():
	}
	t1, w1, err := f.waitingNow(ctx)
	close(stop)
	<-freed
	if err != nil {
		return err
	}
	n := w0 - w1
	elapsed := t1.Sub(t0)
	run.WindowMs = round2(float64(elapsed) / float64(time.Millisecond))
	run.Grants = n
	run.GrantsPerSecond = rate(n, elapsed)
	return nil
}

// waitingNow is how many requests wait on the gateway (status.get's
// counts), and when it was asked.
func (f *simFleet) waitingNow(ctx context.Context) (time.Time, int, error) {
	at := time.Now()
	s, err := bounded(ctx, "status.get", func(ctx context.Context) (contract.Status, error) {
		return f.admin.StatusWith(ctx, contract.StatusGetInput{Summary: true})
	})
	if err != nil {
		return at, 0, err
	}
	if s.Counts == nil {
		return at, 0, contract.Errorf(contract.CodeInternal, "bench: the gateway's status summary has no counts")
	}
	return at, s.Counts.Waiting, nil
}

// makeWaiting makes plan.Waiting lease requests on the gateway
// (lease-request.create), each of a requester of its own, over simAgents
// sessions.
func (f *simFleet) makeWaiting(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var first error
	fail := func(err error) { once.Do(func() { first = err; cancel() }) }
	var wg sync.WaitGroup
	for range simAgents {
		c, err := f.gw.dial(ctx, false)
		if err != nil {
			return benchError("connect", err)
		}
		defer c.Close()
		for range simCreators {
			wg.Go(func() {
				for {
					i := next.Add(1)
					if i > int64(f.plan.Waiting) || ctx.Err() != nil {
						return
					}
					in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid, RequesterID: fmt.Sprintf("%s/wait%d", benchPrincipal, i)}
					if _, err := bounded(ctx, "lease-request.create", func(ctx context.Context) (struct{}, error) {
						return struct{}{}, c.Call(ctx, contract.OpLeaseRequestCreate, in, nil)
					}); err != nil {
						fail(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	return first
}

// free ends leases on the workers, round robin, at rate a second, until
// stop: the oldest of each worker, and none younger than simLeaseAge.
func (f *simFleet) free(ctx context.Context, rate int, stop <-chan struct{}) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	ended, next := 0, 0
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due := int(time.Since(start).Seconds() * float64(rate))
		for tries := 0; ended < due && tries < f.n; {
			w := f.workers[next%f.n]
			next++
			if w.EndOlder(1, simLeaseAge) == 1 {
				ended++
				tries = 0
			} else {
				tries++
			}
		}
	}
}

// measureStorm stops the gateway and starts it again; every worker,
// having lost its uplink, dials again every simRedial until it is back, as
// a worker does (so all dial at once as soon as it listens). It returns
// the time from the gateway's port accepting connections until the
// gateway lists every worker connected (its status read, its view
// current).
func (f *simFleet) measureStorm(ctx context.Context) (float64, error) {
	f.admin.Close()
	f.admin = nil
	gw := f.gw
	f.gw = nil
	if err := gw.stop(ctx); err != nil {
		return 0, err
	}
	d, err := startBenchDaemon(f.env, f.gwHome)
	if err != nil {
		return 0, err
	}
	f.gw = d
	if err := pollUntil(ctx, "the restarted gateway listening", func(ctx context.Context) (bool, error) {
		select {
		case <-d.exited:
			return false, contract.Errorf(contract.CodeDaemonStartupFailed, "bench: the gateway exited at its restart: %s", d.lastWords())
		default:
		}
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(f.url, "http://"), time.Second)
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	}); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := pollUntil(ctx, "the restarted gateway's admin session", func(ctx context.Context) (bool, error) {
		c, err := d.dial(ctx, true)
		if err != nil {
			return false, nil
		}
		f.admin = c
		return true, nil
	}); err != nil {
		return 0, err
	}
	if err := waitWorkersConnectedEvery(ctx, f.admin, f.n, 20*time.Millisecond); err != nil {
		return 0, err
	}
	return round2(float64(time.Since(t0)) / float64(time.Millisecond)), nil
}

// waitWorkersConnectedEvery is waitWorkersConnected polling every every:
// a list of a thousand workers is not read every benchPoll.
func waitWorkersConnectedEvery(ctx context.Context, admin *client.Client, n int, every time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, benchStartBound)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		var ws contract.WorkerListResult
		err := admin.Call(ctx, contract.OpWorkerList, struct{}{}, &ws)
		if err != nil && ctx.Err() == nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return benchError("worker.list", err)
		}
		up := 0
		for _, w := range ws.Workers {
			if w.Connection == contract.WorkerConnected {
				up++
			}
		}
		if up >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return contract.Errorf(contract.CodeInternal, "bench: %d of %d workers connected to the restarted gateway within %s", up, n, benchStartBound)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

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
)

// The fleet benchmark (`simlock bench --fleet`): the same workload against
// a gateway on SQLite and a gateway on PostgreSQL, beside PostgreSQL's own
// commit and the SQLite floor commit measured in the same run.
const (
	// fleetAgents agents lease and release at once in the grants-per-second
	// row; each worker may run as many devices, so every agent can hold a
	// warm device whichever worker the gateway picks.
	fleetAgents = 4
	// fleetStoreSQLite and fleetStorePostgres name the stores in the
	// result.
	fleetStoreSQLite   = "sqlite"
	fleetStorePostgres = "postgres"
	// fleetStoreWorkers demo workers join each gateway of the stores'
	// rows.
	fleetStoreWorkers = 2
)

// FleetPlan is what `simlock bench --fleet` measures.
type FleetPlan struct {
	// Workers are the simulated worker counts of the runs, one run each;
	// Devices the devices of each simulated worker; Waiting the requests
	// in line in the grants-per-second row.
	Workers []int
	Devices int
	Waiting int
	Samples int
	// Postgres is a server URL the bench creates (and drops) a database of
	// its own on; empty: a throwaway cluster when the server binaries are
	// installed.
	Postgres string
	Keep     bool
}

func (p FleetPlan) command() string {
	ns := make([]string, len(p.Workers))
	for i, n := range p.Workers {
		ns[i] = strconv.Itoa(n)
	}
	cmd := fmt.Sprintf("simlock bench --fleet --workers %s --devices %d --waiting %d --samples %d", strings.Join(ns, ","), p.Devices, p.Waiting, p.Samples)
	if p.Postgres != "" {
		cmd += " --postgres URL"
	}
	return cmd
}

// throughputGrants is how many grants the grants-per-second row times.
func (p FleetPlan) throughputGrants() int { return max(p.Samples, 10*fleetAgents) }

// The result of a fleet run; the JSON field names are stable.
type (
	FleetResult struct {
		Command string       `json:"command"`
		Version string       `json:"version"`
		Date    string       `json:"date"`
		Machine benchMachine `json:"machine"`
		Samples int          `json:"samples"`
		Fleet   fleetResult  `json:"fleet"`
	}
	fleetResult struct {
		// Runs are the simulated fleets, one per --workers count.
		Runs []fleetRun `json:"runs"`
		// Workers and the rest are the stores' rows: a gateway on each
		// store with Workers demo workers.
		Workers int          `json:"workers"`
		Agents  int          `json:"agents"`
		Stores  []fleetStore `json:"stores"`
		// PostgresCommit is one small INSERT and its COMMIT on the bench's
		// database, back to back; nil when PostgreSQL was skipped.
		PostgresCommit *benchStat `json:"postgresCommit,omitempty"`
		// SQLiteCommit is the daemon bench's floor commit (one durable
		// SQLite transaction) in a scratch file.
		SQLiteCommit benchStat     `json:"sqliteCommit"`
		Postgres     fleetPostgres `json:"postgres"`
	}
	// fleetStore is one gateway's rows. Skipped says why a store was not
	// measured; then the figures are absent.
	fleetStore struct {
		Store           string     `json:"store"`
		WarmGrant       *benchStat `json:"warmGrant,omitempty"`
		GrantsPerSecond float64    `json:"grantsPerSecond,omitempty"`
		Grants          int        `json:"grants,omitempty"`
		Skipped         string     `json:"skipped,omitempty"`
	}
	// fleetPostgres is the server the PostgreSQL rows ran on: "url" (the
	// --postgres server) or "throwaway" (a cluster the bench started), its
	// version, or why there were no PostgreSQL rows.
	fleetPostgres struct {
		Server  string `json:"server,omitempty"`
		Version string `json:"version,omitempty"`
		Skipped string `json:"skipped,omitempty"`
	}
)

// RunFleet runs the fleet plan in a fresh temporary directory. PostgreSQL
// that cannot be had (no --postgres and no server binaries, a server that
// refuses the bench's database) skips the PostgreSQL rows with the reason;
// it does not fail the run.
func RunFleet(ctx context.Context, env Env, plan FleetPlan, note func(string, ...any)) (res FleetResult, err error) {
	root, done, err := benchRoot(env, "slf", plan.Keep)
	if err != nil {
		return res, err
	}
	defer done(ctx, &err)
	if env.Executable == "" {
		return res, errors.New("bench: the simlock binary's path is unknown")
	}
	res = FleetResult{
		Command: plan.command(), Version: env.Version, Date: time.Now().UTC().Format(time.DateOnly),
		Machine: readMachine(ctx), Samples: plan.Samples,
		Fleet: fleetResult{Runs: []fleetRun{}, Workers: fleetStoreWorkers, Agents: fleetAgents},
	}
	for _, n := range plan.Workers {
		run, err := benchSimRun(ctx, env, filepath.Join(root, "sim"+strconv.Itoa(n)), n, plan, note)
		if err != nil {
			return res, err
		}
		res.Fleet.Runs = append(res.Fleet.Runs, run)
	}

	floor, err := openFloorIn(ctx, root)
	if err != nil {
		return res, err
	}
	defer floor.closeDB()

	note("PostgreSQL: preparing the bench's database")
	pg, err := openBenchPostgres(ctx, env, plan)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := pg.close(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	res.Fleet.Postgres = pg.info

	stores := []struct{ name, value string }{{fleetStoreSQLite, config.StoreSQLite}}
	if pg.url != "" {
		stores = append(stores, struct{ name, value string }{fleetStorePostgres, pg.url})
	}
	for _, s := range stores {
		if err := floor.take(ctx, plan.Samples/4); err != nil {
			return res, err
		}
		row, err := benchFleetStore(ctx, env, filepath.Join(root, s.name), s.name, s.value, plan, note)
		if err != nil {
			return res, err
		}
		res.Fleet.Stores = append(res.Fleet.Stores, row)
		if s.name == fleetStorePostgres {
			note("PostgreSQL: commit")
			st, err := pg.measureCommit(ctx, plan.Samples)
			if err != nil {
				return res, err
			}
			res.Fleet.PostgresCommit = &st
		}
	}
	if pg.url == "" {
		res.Fleet.Stores = append(res.Fleet.Stores, fleetStore{Store: fleetStorePostgres, Skipped: pg.info.Skipped})
	}
	res.Fleet.SQLiteCommit = floor.stat()
	return res, nil
}

// benchFleetStore measures one gateway, on store (gateway.store's value),
// with fleetStoreWorkers demo workers joined to it, in dir.
func benchFleetStore(ctx context.Context, env Env, dir, name, store string, plan FleetPlan, note func(string, ...any)) (row fleetStore, err error) {
	row.Store = name
	var daemons []*benchDaemon
	defer func() {
		// Workers first, so the gateway's stop is not a worker's loss.
		for i := len(daemons) - 1; i >= 0; i-- {
			if serr := daemons[i].stop(ctx); serr != nil && err == nil {
				err = serr
			}
		}
	}()

	note("%s: starting the gateway", name)
	port, err := freeLoopbackPort()
	if err != nil {
		return row, err
	}
	gwHome := filepath.Join(dir, "gw")
	if err := writeFleetConfig(gwHome, [][2]string{
		{"mode", "gateway"}, {"gateway.store", store},
		{"http.enabled", "true"}, {"http.port", strconv.Itoa(port)},
	}); err != nil {
		return row, err
	}
	gw, first, err := startAndWait(ctx, env, gwHome, 0)
	if err != nil {
		return row, err
	}
	first.Close()
	// The gateway is stopped last: it is first in daemons.
	daemons = append(daemons, gw)
	admin, err := gw.dial(ctx, true)
	if err != nil {
		return row, benchError("connect", err)
	}
	defer admin.Close()
	if err := waitLeading(ctx, admin); err != nil {
		return row, err
	}

	note("%s: starting %d workers", name, fleetStoreWorkers)
	gatewayURL := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for i := range fleetStoreWorkers {
		label := fmt.Sprintf("bench-w%d", i+1)
		var tok contract.TokenCreateResult
		if _, err := bounded(ctx, "token.create", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, admin.Call(ctx, contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenWorker, Label: label}, &tok)
		}); err != nil {
			return row, err
		}
		home := filepath.Join(dir, "w"+strconv.Itoa(i+1))
		if err := writeFleetConfig(home, [][2]string{
			{"capacity.strategy", "fixed"},
			{"capacity.config.maxRunning", strconv.Itoa(fleetAgents)},
			{"gateway.url", gatewayURL}, {"gateway.token", tok.Secret}, {"gateway.label", label},
		}); err != nil {
			return row, err
		}
		w, c, err := startAndWait(ctx, env, home, 0)
		if err != nil {
			return row, err
		}
		c.Close()
		daemons = append(daemons, w)
	}
	if err := waitWorkersConnected(ctx, admin, fleetStoreWorkers); err != nil {
		return row, err
	}

	agents := make([]*client.Client, fleetAgents)
	for i := range agents {
		if agents[i], err = gw.dial(ctx, false); err != nil {
			return row, benchError("connect", err)
		}
		defer agents[i].Close()
	}
	note("%s: warming %d devices", name, fleetAgents)
	if _, err := leaseAndRelease(ctx, agents, fleetAgents, false); err != nil {
		return row, err
	}
	if err := waitWarm(ctx, admin, fleetAgents); err != nil {
		return row, err
	}

	note("%s: warm grant through the gateway", name)
	st, err := timed(ctx, plan.Samples, func(ctx context.Context, _ int) (time.Duration, error) {
		in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid, RequesterID: benchPrincipal + "/warm"}
		var dt time.Duration
		g, err := bounded(ctx, "lease.request", func(ctx context.Context) (contract.LeaseGrant, error) {
			t0 := time.Now()
			g, err := agents[0].RequestLease(ctx, in, nil)
			dt = time.Since(t0)
			return g, err
		})
		if err != nil {
			return 0, err
		}
		if g.Source != contract.SourceWarm {
			return 0, contract.Errorf(contract.CodeInternal, "bench: a warm grant through the gateway came from a %s device, not an idle ready one", g.Source)
		}
		if _, err := bounded(ctx, "lease.release", func(ctx context.Context) (contract.ReleaseResult, error) {
			return agents[0].Release(ctx, g.Lease.ID)
		}); err != nil {
			return 0, err
		}
		return dt, waitWarm(ctx, admin, fleetAgents)
	})
	if err != nil {
		return row, err
	}
	row.WarmGrant = &st

	note("%s: grants per second, %d agents", name, fleetAgents)
	grants := plan.throughputGrants()
	t0 := time.Now()
	n, err := leaseAndRelease(ctx, agents, grants, true)
	if err != nil {
		return row, err
	}
	row.Grants = n
	row.GrantsPerSecond = round2(float64(n) / time.Since(t0).Seconds())
	return row, nil
}

// writeFleetConfig writes the config of a fleet bench daemon: demo devices
// at zero timings, nothing that acts on its own within a run, leases that
// outlive it, and the given settings.
func writeFleetConfig(home string, settings [][2]string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	const day = "86400000"
	all := append([][2]string{
		{"drivers.enabled", "demo"},
		{"drivers.demo.provisionMs", "0"},
		{"drivers.demo.bootMs", "0"},
		{"drivers.demo.reclaimMs", "0"},
		{"drivers.demo.downloadMs", "0"},
		{"health.enabled", "false"},
		{"idle.shutdownAfterMs", day},
		{"idle.deleteAfterMs", day},
		{"lease.maxTtlMs", day}, // first: the default may not exceed it
		{"lease.defaultTtlMs", day},
	}, settings...)
	for _, kv := range all {
		if _, err := config.Set(home, kv[0], kv[1]); err != nil {
			return fmt.Errorf("bench: config %s: %w", kv[0], err)
		}
	}
	return nil
}

// leaseAndRelease has the agents take total Android leases between them,
// one requester per agent, each released as soon as it is granted; with
// anyAgent false each agent holds its lease until all have one (so that
// many devices exist). It returns how many grants it saw.
func leaseAndRelease(ctx context.Context, agents []*client.Client, total int, loop bool) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var firstErr error
	fail := func(err error) { once.Do(func() { firstErr = err; cancel() }) }
	var held sync.WaitGroup // !loop: every agent holds one before any release
	if !loop {
		held.Add(len(agents))
	}
	var wg sync.WaitGroup
	for a, c := range agents {
		in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid, RequesterID: fmt.Sprintf(benchPrincipal+"/agent%d", a)}
		wg.Go(func() {
			for next.Add(1) <= int64(total) && ctx.Err() == nil {
				g, err := bounded(ctx, "lease.request", func(ctx context.Context) (contract.LeaseGrant, error) { return c.RequestLease(ctx, in, nil) })
				if err != nil {
					fail(err)
					if !loop {
						held.Done()
					}
					return
				}
				if !loop {
					held.Done()
					held.Wait()
				}
				if _, err := bounded(ctx, "lease.release", func(ctx context.Context) (contract.ReleaseResult, error) { return c.Release(ctx, g.Lease.ID) }); err != nil {
					fail(err)
					return
				}
				if !loop {
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return min(total, int(next.Load())), nil
}

// waitWorkersConnected polls the gateway's worker list, within
// benchStartBound, until n workers are connected.
func waitWorkersConnected(ctx context.Context, admin *client.Client, n int) error {
	return pollUntil(ctx, fmt.Sprintf("%d workers connected to the gateway", n), func(ctx context.Context) (bool, error) {
		var ws contract.WorkerListResult
		if err := admin.Call(ctx, contract.OpWorkerList, struct{}{}, &ws); err != nil {
			return false, benchError("worker.list", err)
		}
		up := 0
		for _, w := range ws.Workers {
			if w.Connection == contract.WorkerConnected {
				up++
			}
		}
		return up >= n, nil
	})
}

// waitLeading polls the gateway's status, within benchStartBound, until
// it serves: a gateway on PostgreSQL is a replica, which serves only once
// it is elected leader (alone, it soon is); any other gateway serves at
// once.
func waitLeading(ctx context.Context, admin *client.Client) error {
	return pollUntil(ctx, "leadership of the gateway", func(ctx context.Context) (bool, error) {
		s, err := admin.StatusWith(ctx, contract.StatusGetInput{Summary: true})
		if err != nil {
			return false, benchError("status.get", err)
		}
		return s.Leadership == nil || s.Leadership.Role == contract.RoleLeader, nil
	})
}

// waitWarm polls the gateway's status, within benchStartBound, until it
// shows n idle ready Android devices: as many warm devices as agents.
func waitWarm(ctx context.Context, admin *client.Client, n int) error {
	return pollUntil(ctx, fmt.Sprintf("%d idle ready Android devices on the gateway", n), func(ctx context.Context) (bool, error) {
		s, err := admin.Status(ctx)
		if err != nil {
			return false, benchError("status.get", err)
		}
		ready := 0
		for _, d := range s.Devices {
			if d.Spec.Platform == contract.PlatformAndroid && d.State == contract.DeviceReady && d.LeaseID == "" {
				ready++
			}
		}
		return ready >= n, nil
	})
}

// pollUntil calls check every benchPoll until it says done, for at most
// benchStartBound.
func pollUntil(ctx context.Context, what string, check func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, benchStartBound)
	defer cancel()
	tick := time.NewTicker(benchPoll)
	defer tick.Stop()
	for {
		ok, err := check(ctx)
		switch {
		case ok:
			return nil
		case err != nil && ctx.Err() == nil:
			return err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return contract.Errorf(contract.CodeInternal, "bench: no %s within %s", what, benchStartBound)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// freeLoopbackPort is a port on 127.0.0.1 the OS reports free, for a
// gateway the workers must be told the address of before it starts.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("bench: a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/leasing"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/store/memstore"
	"github.com/simlock/simlock/internal/store/sqlite"
)

// benchStores are the stores the decision benchmarks run on, one
// sub-benchmark each. On sqlite the daemon runs as it always does: each
// decision commits to the home's database. On memory the engine commits
// its decisions to memory (memstore) instead, and everything else is as
// before: what is left is the daemon's own cost of a decision (the frame,
// the engine, the answer), which no store, however fast, takes away.
//
//	go test ./internal/daemon -run XXX -bench 'Ping|Floor|Renew|GrantIdle|ReleaseToQueued' -benchtime 2000x
var benchStores = []struct {
	name string
	// on sets the store up in o; the check it returns runs after the
	// benchmark, and fails it if the store was not the one used.
	on func(o *Options) (check func(b *testing.B))
}{
	{"sqlite", func(*Options) func(*testing.B) { return func(*testing.B) {} }},
	{"memory", func(o *Options) func(*testing.B) {
		mem := memstore.New()
		var home *sqlite.DB
		o.engineStore = func(db *sqlite.DB) leasing.Store {
			home = db
			return memoryEngine{DB: db, mem: mem}
		}
		return func(b *testing.B) {
			// Every decision went to memory: the database's event log
			// stayed empty.
			if home == nil {
				b.Fatal("the daemon never asked for its engine's store: decisions were committed to its database")
			}
			if seq, err := home.LastSeq(context.Background()); err != nil || seq != 0 {
				b.Fatalf("the home's database holds events up to seq %d (%v): decisions were committed to it", seq, err)
			}
			if seq, _ := mem.LastSeq(context.Background()); seq == 0 {
				b.Fatal("no decision was committed to memory")
			}
		}
	}},
}

// memoryEngine is the home's database with the engine's commits, and the
// write lock they are made under, taken by memory.
type memoryEngine struct {
	*sqlite.DB
	mem *memstore.Store
}

func (m memoryEngine) Commit(ctx context.Context, c store.Change) ([]contract.Event, error) {
	return m.mem.Commit(ctx, c)
}

func (m memoryEngine) Reserve(ctx context.Context) (store.Reservation, error) {
	return m.mem.Reserve(ctx)
}

// onEachStore runs bench once per store of benchStores, with a daemon of
// demo drivers at zero timings and cfg's settings over them.
func onEachStore(b *testing.B, cfg string, bench func(b *testing.B, home string)) {
	for _, st := range benchStores {
		b.Run("store="+st.name, func(b *testing.B) {
			c, err := config.Parse([]byte(cfg))
			if err != nil {
				b.Fatal(err)
			}
			opts := Options{Config: c, Drivers: demoDrivers(b)}
			check := st.on(&opts)
			_, home := startDaemonOpts(b, opts)
			bench(b, home)
			check(b)
		})
	}
}

// medians collects one time a loop and reports their median as p50-µs,
// which a stray slow turn on a shared machine does not move (ns/op is the
// mean).
type medians []time.Duration

// timeEach runs op once a loop, times each run, and reports the median
// (p50-µs) beside the mean.
func timeEach(b *testing.B, op func() error) {
	var took medians
	for b.Loop() {
		t0 := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	took.report(b)
}

func (m medians) report(b *testing.B) {
	if len(m) == 0 {
		return
	}
	slices.Sort(m)
	b.ReportMetric(float64(m[len(m)/2].Nanoseconds())/1e3, "p50-µs")
}

// benchSettings are `simlock bench`'s: the demo driver starts and cleans at
// once, and no health probe runs beside the decisions timed.
const benchSettings = `"drivers":{"demo":{"provisionMs":0,"bootMs":0,"reclaimMs":0}},"health":{"enabled":false}`

// BenchmarkPing measures the protocol's round trip alone: a ping, which
// the daemon answers on the session's reading goroutine without deciding
// anything. With a floor commit (BenchmarkFloorCommit) it is the in-situ
// floor `simlock bench` reads its ratios against.
func BenchmarkPing(b *testing.B) {
	_, home := startDaemon(b, nil)
	c := dial(b, home, "bench", false)
	ctx := context.Background()
	timeEach(b, func() error { return c.Ping(ctx) })
}

// BenchmarkFloorCommit measures the store's floor commit, what a renewal
// writes (sqlite.DB.CommitFloor), in a scratch database of its own: with
// BenchmarkPing, the in-situ floor of `simlock bench` as this process
// measures it, for the ratios of the decision benchmarks on either store.
func BenchmarkFloorCommit(b *testing.B) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "floor.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := db.CommitFloor(ctx); err != nil { // seeds its rows
		b.Fatal(err)
	}
	timeEach(b, func() error { return db.CommitFloor(ctx) })
}

// BenchmarkRenewRoundTrip measures lease.renew round trips over the unix
// socket: frame, dispatch, one decision and its commit, answer.
func BenchmarkRenewRoundTrip(b *testing.B) {
	onEachStore(b, `{`+benchSettings+`}`, func(b *testing.B, home string) {
		c := dial(b, home, "bench", false)
		ctx := context.Background()
		g, err := c.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS}, nil)
		if err != nil {
			b.Fatal(err)
		}
		timeEach(b, func() error {
			_, err := c.Renew(ctx, g.Lease.ID, 0)
			return err
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "renews/s")
	})
}

// BenchmarkGrantIdleReadyDevice measures the time from lease.request to the
// grant when an idle ready device fits (demo timings at zero): the queue,
// the plan and the grant's commit, over the socket. Each lease is released,
// untimed, and the next request waits until the device is clean again.
func BenchmarkGrantIdleReadyDevice(b *testing.B) {
	onEachStore(b, `{`+benchSettings+`}`, func(b *testing.B, home string) {
		c := dial(b, home, "bench", false)
		admin := dial(b, home, "ops", true)
		ctx := context.Background()
		events, _, err := admin.Subscribe(ctx)
		if err != nil {
			b.Fatal(err)
		}
		// Android reclaims leave the device ready: one lease and release warm it.
		in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid}
		release := func(id string) {
			if _, err := c.Release(ctx, id); err != nil {
				b.Fatal(err)
			}
			for ev := range events {
				if ev.Event == "device.reclaimed" {
					return
				}
			}
			b.Fatal("event stream ended")
		}
		g, err := c.RequestLease(ctx, in, nil)
		if err != nil {
			b.Fatal(err)
		}
		release(g.Lease.ID)
		var took medians
		for b.Loop() {
			t0 := time.Now()
			g, err := c.RequestLease(ctx, in, nil)
			if err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(t0))
			if g.Source != contract.SourceWarm {
				b.Fatalf("source %s, want warm", g.Source)
			}
			b.StopTimer()
			release(g.Lease.ID)
			b.StartTimer()
		}
		took.report(b)
	})
}

// BenchmarkStatusFull measures a full status.get with 10,000 live leases:
// the snapshot, its encoding and the read of the frame by the client
// (decoded into a contract.Status, and only read as raw JSON).
func BenchmarkStatusFull(b *testing.B) {
	cfg, err := config.Parse([]byte(`{"capacity":{"strategy":"fixed","config":{"maxRunning":20000,"ios":{"maxRunning":20000,"maxDevices":20000}}},"lease":{"defaultTtlMs":3600000}}`))
	if err != nil {
		b.Fatal(err)
	}
	_, home := startDaemon(b, cfg)
	ctx := context.Background()
	admin := dial(b, home, "ops", true)
	for i := range 10000 {
		if _, err := admin.RequestLease(ctx, contract.LeaseRequestInput{Platform: contract.PlatformIOS, RequesterID: fmt.Sprintf("r%d", i)}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("decoded", func(b *testing.B) {
		for b.Loop() {
			if _, err := admin.Status(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		for b.Loop() {
			var raw json.RawMessage
			if err := admin.Call(ctx, contract.OpStatusGet, contract.StatusGetInput{}, &raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReleaseToQueuedGrant measures the time from a release to the
// grant of the request queued behind it (the device is cleaned at once, in
// the demo driver at zero timings, and handed on in the clean's commit).
func BenchmarkReleaseToQueuedGrant(b *testing.B) {
	onEachStore(b, `{`+benchSettings+`,"capacity":{"strategy":"fixed","config":{"maxRunning":1}}}`, func(b *testing.B, home string) {
		ctx := context.Background()
		a, w := dial(b, home, "a", false), dial(b, home, "w", false)
		in := contract.LeaseRequestInput{Platform: contract.PlatformAndroid}
		held, err := a.RequestLease(ctx, in, nil)
		if err != nil {
			b.Fatal(err)
		}
		holder, waiter := a, w
		var took medians
		for b.Loop() {
			b.StopTimer()
			queued := make(chan struct{}, 1)
			got := make(chan contract.LeaseGrant, 1)
			at := make(chan time.Time, 1)
			go func() {
				g, err := waiter.RequestLease(ctx, in, func(p contract.LeaseProgress) {
					if p.Stage == contract.StageQueued {
						select {
						case queued <- struct{}{}:
						default:
						}
					}
				})
				at <- time.Now()
				if err != nil {
					b.Error(err)
				}
				got <- g
			}()
			<-queued
			b.StartTimer()
			t0 := time.Now()
			if _, err := holder.Release(ctx, held.Lease.ID); err != nil {
				b.Fatal(err)
			}
			took = append(took, (<-at).Sub(t0))
			held = <-got
			holder, waiter = waiter, holder
		}
		took.report(b)
	})
}

// BenchmarkRoundTrip measures the protocol alone: a lease.list of no
// leases, which decides nothing and touches no store.
func BenchmarkRoundTrip(b *testing.B) {
	_, home := startDaemon(b, nil)
	c := dial(b, home, "bench", false)
	ctx := context.Background()
	for b.Loop() {
		if _, err := c.Leases(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

package leasing

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/store"
)

// TestCountersMatchARecountAfterEveryRandomTransition runs random sequences
// of device changes (new devices, state moves the state machine allows,
// claims, leases, stuck marks, uses, deletions) through the registry and,
// after every step, checks its counters and indexes against a recount from
// scratch.
func TestCountersMatchARecountAfterEveryRandomTransition(t *testing.T) {
	limits := core.Limits{Strategy: "resource", MaxRunning: 4, Platforms: map[contract.Platform]core.PlatformLimits{
		contract.PlatformIOS: {MaxDevices: 3, MaxRunning: 2}, contract.PlatformAndroid: {MaxDevices: 2, MaxRunning: 2},
	}, RAM: &core.RAMBudget{LimitBytes: 10, PerDevice: map[contract.Platform]int64{contract.PlatformIOS: 2, contract.PlatformAndroid: 3}}}
	models := []string{"iPhone 17", "iPad Air", "Pixel 9"}
	versions := []string{"18.6", "26.1", "36"}
	claims := []claim{claimNone, claimBoot, claimEviction, claimDestroy, claimReclaim, claimCleanup, claimNuke, claimRetry}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		r := newRegistry(limits)
		var ids []string
		for step := range 300 {
			op := rng.IntN(7)
			if len(ids) == 0 {
				op = 0
			}
			var what string
			switch op {
			case 0:
				p := contract.Platforms()[rng.IntN(2)]
				states := []contract.DeviceState{contract.DeviceProvisioning, contract.DeviceReady, contract.DeviceShutdown, contract.DeviceQuarantined}
				d := r.add(store.Device{
					ID: fmt.Sprintf("dev_%d_%d", seed, step), Platform: p, Model: models[rng.IntN(3)], OSVersion: versions[rng.IntN(3)],
					State: states[rng.IntN(len(states))], CreatedAt: int64(rng.IntN(5)), LastUsedAt: int64(rng.IntN(50)),
				})
				ids = append(ids, d.ID)
				what = "add " + d.ID
			default:
				i := rng.IntN(len(ids))
				d, _ := r.get(ids[i])
				switch op {
				case 1:
					var to []contract.DeviceState
					for _, s := range core.DeviceStates() {
						if s != d.State && core.CanTransition(d.State, s) {
							to = append(to, s)
						}
					}
					if len(to) == 0 {
						continue
					}
					s := to[rng.IntN(len(to))]
					what = fmt.Sprintf("move %s %s -> %s", d.ID, d.State, s)
					r.update(d, func(d *dev) { d.State, d.StateSince = s, int64(step) })
					if s == contract.DeviceDeleted {
						ids = append(ids[:i], ids[i+1:]...)
					}
				case 2:
					c := claims[rng.IntN(len(claims))]
					what = fmt.Sprintf("claim %s %s", d.ID, c)
					r.update(d, func(d *dev) { d.claim = c })
				case 3:
					l := ""
					if rng.IntN(2) == 0 {
						l = "lse_" + d.ID
					}
					what = fmt.Sprintf("lease %s %q", d.ID, l)
					r.update(d, func(d *dev) { d.lease = l })
				case 4:
					what = "stuck " + d.ID
					r.update(d, func(d *dev) { d.stuck = !d.stuck })
				case 5, 6:
					u := int64(rng.IntN(100))
					what = fmt.Sprintf("use %s at %d", d.ID, u)
					r.update(d, func(d *dev) { d.LastUsedAt = u })
				}
			}
			if err := checkRegistry(r); err != nil {
				t.Fatalf("seed %d step %d (%s): %v", seed, step, what, err)
			}
		}
	}
}

// checkRegistry compares every count and index with what the devices say.
func checkRegistry(r *registry) error {
	use, warm := r.recount()
	if use != r.use {
		return fmt.Errorf("usage %+v, recount %+v", r.use, use)
	}
	if warm != r.warm {
		return fmt.Errorf("warm %v, recount %v", r.warm, warm)
	}
	states := map[contract.DeviceState]int{}
	n, last := 0, (*dev)(nil)
	r.each(func(d *dev) bool {
		n++
		states[d.State]++
		if last != nil && (last.CreatedAt > d.CreatedAt || (last.CreatedAt == d.CreatedAt && last.ID > d.ID)) {
			n = -1 << 30
		}
		last = d
		return true
	})
	if n != len(r.byID) {
		return fmt.Errorf("the order list holds %d devices out of order or of %d", n, len(r.byID))
	}
	for s, c := range r.byState() {
		if states[s] != c {
			return fmt.Errorf("%d devices %s, recount %d", c, s, states[s])
		}
	}
	want := map[*useOrder]map[*dev]bool{}
	for _, d := range r.byID {
		var in []*useOrder
		b := r.fits[d.Platform.Index()][fitKey{d.Model, d.OSVersion, d.ImageTag, d.Mode}]
		switch {
		case d.State == contract.DeviceReady && d.idle():
			in = append(in, &b.ready)
		case d.State == contract.DeviceShutdown && d.idle():
			in = append(in, &b.shutdown)
		case d.State == contract.DeviceReclaiming:
			in = append(in, &b.reclaiming)
		}
		if d.idle() && !d.stuck && (d.State == contract.DeviceReady || d.State == contract.DeviceShutdown || d.State == contract.DeviceQuarantined) {
			in = append(in, r.victims[victimKey{d.State, d.Platform}])
		}
		for _, o := range in {
			if o == nil {
				return fmt.Errorf("%s belongs in an index that does not exist", d.ID)
			}
			if want[o] == nil {
				want[o] = map[*dev]bool{}
			}
			want[o][d] = true
		}
	}
	var all []*useOrder
	for _, m := range r.fits {
		for k, b := range m {
			if b.empty() {
				return fmt.Errorf("bucket %v is empty but kept", k)
			}
			all = append(all, &b.ready, &b.shutdown, &b.reclaiming)
		}
	}
	for _, v := range r.victims {
		all = append(all, v)
	}
	for _, o := range all {
		if len(o.items) != len(want[o]) {
			return fmt.Errorf("an index holds %d devices, want %d", len(o.items), len(want[o]))
		}
		for i, d := range o.items {
			if !want[o][d] {
				return fmt.Errorf("%s is in an index it does not belong to", d.ID)
			}
			if i > 0 && (o.keys[i-1] > o.keys[i] || (o.keys[i-1] == o.keys[i] && o.items[i-1].ID > d.ID)) {
				return fmt.Errorf("an index is out of order at %s", d.ID)
			}
		}
	}
	return nil
}

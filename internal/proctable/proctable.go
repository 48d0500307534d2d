// Package proctable reads this machine's process table: whether a process
// runs, and since when. lease.bind watches a bound process through it, and
// the CLI asks it first, so that `lease --bind-pid` of a process that does
// not run is refused before a device is started or a lease granted.
//
// Its functions only read the kernel's table and are safe to call
// concurrently.
package proctable

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shirou/gopsutil/v4/process"
)

// Table is the machine's process table, for lease.bind.
type Table struct{}

// StartedAt reads when process pid started, in epoch ms, as the kernel
// keeps it: the same for as long as the process lives. A zombie has exited
// (only its parent has not collected it yet), so it counts as gone.
func (Table) StartedAt(pid int) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p, err := process.NewProcessWithContext(ctx, int32(pid))
	if err != nil {
		return 0, err
	}
	if st, err := p.StatusWithContext(ctx); err == nil && slices.Contains(st, process.Zombie) {
		return 0, fmt.Errorf("process %d has exited", pid)
	}
	return p.CreateTimeWithContext(ctx)
}

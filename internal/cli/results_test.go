package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// release --all on a terminal says each lease it could not release and
// where it can be, not only what it released.
func TestReleaseAllSaysWhatItDidNotRelease(t *testing.T) {
	var b bytes.Buffer
	renderReleaseAll(&b, contract.ReleaseAllResult{Released: []string{"w1.lse_a"}, Cancelled: []string{},
		Skipped: []contract.SkippedLease{{LeaseID: "lse_b", WorkerID: "w2", Reason: contract.ReasonWorkerOwnLease,
			Message: "lease lse_b is worker-b's own: release it on that worker"}}})
	out := b.String()
	if !strings.Contains(out, "Released 1 lease") {
		t.Errorf("release --all printed %q, want the lease it released", out)
	}
	if !strings.Contains(out, "not released: lease lse_b is worker-b's own: release it on that worker") {
		t.Errorf("release --all printed %q, want the lease it skipped with where to release it", out)
	}
}

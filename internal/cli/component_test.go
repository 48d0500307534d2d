package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
)

// A runtime the driver cannot download is refused with the ones it can,
// and the next step is the install of one of them, runnable as written.
func TestANotDownloadableRuntimeNamesTheOnesOffered(t *testing.T) {
	ce := driver.ContractError(&driver.NotDownloadableError{Platform: contract.PlatformIOS, Component: "99",
		Reason: "the demo driver can download only 26.4", Offered: []string{"26.4"}})
	if ce.Code != contract.CodeRuntimeMissing || len(strList(ce.Details["offered"])) != 1 {
		t.Fatalf("%v, want RUNTIME_MISSING with offered", ce)
	}
	if got, want := nextStep(ce), "simlock component install ios 26.4 installs one the driver offers (26.4)"; got != want {
		t.Errorf("next step %q, want %q", got, want)
	}
	// As decoded from the daemon's answer.
	decoded := contract.Errorf(contract.CodeRuntimeMissing, "x").With("platform", "android").With("downloadable", false).With("offered", []any{"37", "36"})
	if got, want := nextStep(decoded), "simlock component install android 37 installs one the driver offers (37, 36)"; got != want {
		t.Errorf("next step %q, want %q", got, want)
	}
	bare := contract.Errorf(contract.CodeRuntimeMissing, "x").With("platform", "ios").With("downloadable", false)
	if got, want := nextStep(bare), "simlock catalog --platform ios shows the installed and downloadable runtimes"; got != want {
		t.Errorf("next step %q, want %q", got, want)
	}
}

// An install on this machine that fails says what to run next with its
// platform and version (its events carry no job snapshot to read them
// from), and a runtime that cannot be downloaded points at the catalog
// rather than at the same install again.
func TestAFailedLocalInstallNamesItsRuntimeInTheNextStep(t *testing.T) {
	for _, c := range []struct {
		code contract.Code
		want string
	}{
		{contract.CodeInternal, "try it again:  simlock component install ios 26.4\n"},
		{contract.CodeRuntimeMissing, "see what it offers:  simlock catalog --platform ios\n"},
	} {
		var b bytes.Buffer
		p := newJobPrinter(&b, "human", nil, false)
		p.knowSpec(contract.JobSpec{Platform: contract.PlatformIOS, Version: "26.4"})
		p.show(contract.JobEvent{Phase: &contract.JobPhase{Phase: "download", Status: "start", WorkerID: "ins_1"}})
		p.show(contract.JobEvent{Error: &contract.JobError{Phase: "download", WorkerID: "ins_1", Code: c.code, Message: "no"}})
		p.show(contract.JobEvent{Done: &contract.JobDone{JobID: "job_1", Result: contract.JobFailed,
			Workers: []contract.JobOutcome{{WorkerID: "ins_1", Outcome: contract.OutcomeFailed}}}})
		p.stop()
		if !strings.HasSuffix(b.String(), c.want) {
			t.Errorf("%s: printed\n%s\nwant it to end %q", c.code, b.String(), c.want)
		}
	}
}

package leasing

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simlock/simlock/internal/components"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

const downloadTime = 10 * time.Second

// echoInstaller is the demo driver's installer, but it reports every
// percentage twice, and a second fraction of the same whole number, as
// real installers redraw their bars.
type echoInstaller struct{ *demo.Driver }

func (e echoInstaller) InstallComponent(ctx context.Context, c string, progress func(driver.InstallProgress)) (driver.InstallResult, error) {
	return e.Driver.InstallComponent(ctx, c, func(pr driver.InstallProgress) {
		p := pr.Percent
		progress(pr)
		progress(pr)
		if p != float64(int(p)) {
			again := pr
			again.Percent = float64(int(p)) + 0.9
			progress(again)
		}
	})
}

type memComponents struct {
	mu   sync.Mutex
	recs []components.Record
}

func (m *memComponents) PutComponent(_ context.Context, r components.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, r)
	return nil
}

func (m *memComponents) Components(context.Context) ([]components.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.recs), nil
}

func (m *memComponents) DeleteComponent(context.Context, contract.Platform, string) error { return nil }

// startDownloads is start with demo drivers that can download iOS 26.4 and
// 27.0, through a component installer, under the given downloads.policy.
func startDownloads(t *testing.T, limits int, policy string) (*harness, *components.Installer) {
	t.Helper()
	var in *components.Installer
	h := build(t, newMemStore(), fixed(limits), nil, func(o *demo.Options) {
		o.DownloadableRuntimes = map[contract.Platform][]string{contract.PlatformIOS: {"26.4", "27.0"}, contract.PlatformAndroid: {"37"}}[o.Platform]
		o.DownloadTime = downloadTime
	}, func(h *harness, o *Options) {
		installers := map[contract.Platform]driver.Installer{}
		for p, d := range h.drivers {
			installers[p] = echoInstaller{d}
		}
		in = components.New(components.Options{Drivers: installers, Records: &memComponents{}, Timeout: time.Hour})
		t.Cleanup(in.Close)
		o.Installer, o.DownloadPolicy = in, policy
	})
	return h, in
}

func downloadSteps(got []contract.LeaseProgress) []contract.LeaseProgress {
	var out []contract.LeaseProgress
	for _, p := range got {
		if p.Stage == contract.StageDownloading {
			out = append(out, p)
		}
	}
	return out
}

func TestDownloadStageComesBeforeProvisioningWithRisingWholePercents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := startDownloads(t, 2, "on-request")
		p := h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, OSVersion: "26.4", AllowDownload: true})
		g := h.mustGrant(p)
		if g.Device.Spec.OSVersion != "26.4" {
			t.Fatalf("granted %+v, want iOS 26.4", g.Device.Spec)
		}
		steps := p.stages()
		var stages []contract.Stage
		for _, s := range steps {
			if len(stages) == 0 || stages[len(stages)-1] != s.Stage {
				stages = append(stages, s.Stage)
			}
		}
		if want := []contract.Stage{contract.StageDownloading, contract.StageProvisioning, contract.StageBooting}; !slices.Equal(stages, want) {
			t.Fatalf("stages = %v, want %v", stages, want)
		}
		dl := downloadSteps(steps)
		if dl[0].Component != "26.4" || dl[0].Waiting || dl[0].Percent != nil {
			t.Errorf("first download step = %+v, want 26.4, not waiting, no percent yet", dl[0])
		}
		var pcts []int
		for _, s := range dl[1:] {
			if s.Percent == nil || s.Waiting || s.Component != "26.4" {
				t.Fatalf("download step %+v has no percent", s)
			}
			pcts = append(pcts, *s.Percent)
		}
		if want := []int{0, 10, 20, 30, 41, 50, 60, 70, 80, 90, 100}; !slices.Equal(pcts, want) {
			t.Errorf("percents = %v, want %v: each whole number once, 41.7 as 41", pcts, want)
		}
	})
}

func TestWithoutAllowDownloadNothingDownloads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, in := startDownloads(t, 2, "on-request")
		p := h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, OSVersion: "26.4"})
		<-p.done
		ce := wantCode(t, p.err, contract.CodeRuntimeMissing)
		if ce.Details["downloadable"] != true || ce.Details["hint"] == nil {
			t.Errorf("error %v does not say a download would help", ce)
		}
		if len(downloadSteps(p.stages())) != 0 || len(in.Installs()) != 0 {
			t.Errorf("a request without allowDownload downloaded: %+v", p.stages())
		}
		// An installed runtime never shows the stage, even when allowed.
		q := h.acquire("b", contract.LeaseRequestInput{Platform: contract.PlatformIOS, OSVersion: "26.1", AllowDownload: true})
		h.mustGrant(q)
		if len(downloadSteps(q.stages())) != 0 {
			t.Errorf("installed runtime showed downloading: %+v", q.stages())
		}
	})
}

func TestPolicyNeverAndAlways(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := startDownloads(t, 2, "never")
		p := h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, OSVersion: "26.4", AllowDownload: true})
		<-p.done
		wantCode(t, p.err, contract.CodeRuntimeMissing)
	})
	synctest.Test(t, func(t *testing.T) {
		h, _ := startDownloads(t, 2, "always")
		g := h.mustGrant(h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, OSVersion: "26.4"}))
		if g.Device.Spec.OSVersion != "26.4" {
			t.Errorf("policy always: granted %+v", g.Device.Spec)
		}
	})
}

func TestJoinerSeesTheLatestPercentAtOnceAndWaiterSeesWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := startDownloads(t, 4, "on-request")
		a := h.acquire("a", contract.LeaseRequestInput{Platform: contract.PlatformIOS, OSVersion: "26.4", AllowDownload: true})
		time.Sleep(downloadTime/2 + time.Second/2) // half the download is done
		synctest.Wait()
		b := h.acquire("b", contract.LeaseRequestInput{Platform: contract.PlatformIOS, Model: "iPhone 17", OSVersion: "26.4", AllowDownload: true})
		synctest.Wait()
		first := downloadSteps(b.stages())
		if len(first) != 1 || first[0].Percent == nil || *first[0].Percent != 50 {
			t.Fatalf("joiner's first steps = %+v, want the latest (50%%) at once", first)
		}
		// Another component on the same platform waits its turn.
		c := h.acquire("c", contract.LeaseRequestInput{Platform: contract.PlatformIOS, OSVersion: "27.0", AllowDownload: true})
		synctest.Wait()
		if got := downloadSteps(c.stages()); len(got) != 1 || !got[0].Waiting || got[0].Component != "27.0" {
			t.Fatalf("second component's steps = %+v, want waiting", got)
		}
		h.mustGrant(a)
		h.mustGrant(b)
		<-c.done
		got := downloadSteps(c.stages())
		if len(got) < 2 || got[1].Waiting {
			t.Errorf("second component's steps = %+v, want waiting then not waiting", got)
		}
	})
}

func TestDownloadingRequestIsNotCancellableButItsRequesterMayLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, in := startDownloads(t, 2, "on-request")
		ctx := context.Background()
		st, err := h.e.Submit(ctx, Caller{Principal: "a"}, contract.LeaseRequestInput{Platform: contract.PlatformIOS, OSVersion: "26.4", AllowDownload: true})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		got, _ := h.e.RequestStatus(ctx, Caller{Principal: "a"}, contract.LeaseRequestGetInput{RequestID: st.Request.ID})
		if got.Phase() != "downloading" || got.Progress.Component != "26.4" {
			t.Fatalf("request during the download = %s %+v", got.Phase(), got.Progress)
		}
		if res, _ := h.e.Cancel(ctx, Caller{Principal: "a"}, contract.LeaseCancelInput{RequestID: st.Request.ID}); res.Outcome != contract.CancelNotCancellable {
			t.Errorf("cancel while downloading = %s, want not-cancellable", res.Outcome)
		}
		if w := h.e.waitingList(); len(w) != 1 || w[0].Stage != "downloading" {
			t.Errorf("waiting list = %+v", w)
		}
		// A socket requester that leaves ends its own request; the
		// install goes on.
		b := h.acquire("b", contract.LeaseRequestInput{Platform: contract.PlatformAndroid, OSVersion: "37", AllowDownload: true})
		time.Sleep(time.Second)
		b.cancel()
		<-b.done
		wantCode(t, b.err, contract.CodeCancelled)
		if ins := in.Installs(); len(ins) != 2 {
			t.Errorf("installs after the requester left = %+v, want both still running", ins)
		}
	})
}

package shimtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// download runs xcodebuild -downloadPlatform with extra environment and
// says how long it took.
func download(t *testing.T, e Env, version string, extra ...string) time.Duration {
	t.Helper()
	cmd := exec.Command(filepath.Join(e.Bin, "xcodebuild"), "-downloadPlatform", "iOS", "-buildVersion", version)
	cmd.Env = append(e.Environ(nil), extra...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("xcodebuild: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Done downloading: iOS "+version) {
		t.Errorf("output %q", out)
	}
	return time.Since(start)
}

// The download step set for the state reaches every call; the environment
// overrides it for one.
func TestDownloadStepSetting(t *testing.T) {
	e := Build(t)
	const step = 150 * time.Millisecond
	e.SetDownloadStep(t, step)
	// Seven redraws, each after a step.
	if took := download(t, e, "26.4"); took < 7*step {
		t.Errorf("a download with a step of %s took %s", step, took)
	}
	if took := download(t, e, "18.4", "SIMLOCK_SHIM_"+SettingDownloadStep+"=1ms"); took >= 7*step {
		t.Errorf("a download with the environment's step of 1ms took %s", took)
	}
}

// Build lays out the default system images as an SDK has them.
func TestDefaultImages(t *testing.T) {
	e := Build(t)
	for _, pkg := range DefaultAndroidImages() {
		dir := filepath.Join(append([]string{e.SDK}, strings.Split(pkg, ";")...)...)
		if b, err := os.ReadFile(filepath.Join(dir, "source.properties")); err != nil || !strings.Contains(string(b), "Pkg.Revision=") {
			t.Errorf("%s: %q, %v", pkg, b, err)
		}
	}
}

package installproc

import (
	"math"
	"reflect"
	"testing"

	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/runner"
)

// FuzzInstallerOutput feeds the progress reader any output, cut into
// chunks of any size. It never panics; every report is a percentage within
// 0-100 and sizes with done within total; what is reported does not depend
// on how the output was cut; the kept output stays within its bound.
func FuzzInstallerOutput(f *testing.F) {
	for _, seed := range []string{
		"Downloading iOS 26.4 Simulator: 2,7% (235 MB of 8,86 GB)\rDownloading: 41.0% (3.6 GB of 8.9 GB)\r\n",
		"[=====>     ] 45% Downloading system image\n[===========] 100%\n", "1000%\n", "99.9999999999%\n",
		"120.5MB/1.2GB\r", "5 GiB of 1 KiB\n", "9999999999 TB of 99999999999 TB\n", "\r\r\n\n%", "50 %\r\n100%",
		"0.0000001 B of 0 B\n", "3,5,5%\n",
	} {
		f.Add([]byte(seed), []byte("error: license not accepted\n"), uint8(0))
	}
	f.Fuzz(func(t *testing.T, stdout, stderr []byte, chunk uint8) {
		whole := reports(t, fake{stdout: string(stdout), stderr: string(stderr)})
		cut := reports(t, fake{stdout: string(stdout), stderr: string(stderr), chunk: int(chunk%32) + 1})
		if !reflect.DeepEqual(whole, cut) {
			t.Fatalf("output cut in chunks of %d reports %+v, whole %+v", chunk%32+1, cut, whole)
		}
		for _, p := range whole {
			if math.IsNaN(p.Percent) || p.Percent < 0 || p.Percent > 100 {
				t.Fatalf("reported %v%%", p.Percent)
			}
			if p.Bytes < 0 || p.Total < 0 || (p.Total > 0 && p.Bytes > p.Total) {
				t.Fatalf("reported %d of %d bytes", p.Bytes, p.Total)
			}
		}
	})
}

func reports(t *testing.T, s Streamer) []driver.InstallProgress {
	t.Helper()
	var got []driver.InstallProgress
	res, err := Run(t.Context(), s, runner.Cmd{Path: "installer"}, func(p driver.InstallProgress) {
		if p.Step == driver.InstallFigures {
			got = append(got, p)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) > MaxOutput {
		t.Fatalf("kept %d bytes of output, more than %d", len(res.Output), MaxOutput)
	}
	return got
}

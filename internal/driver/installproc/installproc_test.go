package installproc

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/runner"
)

// xcodebuildOutput is what xcodebuild -downloadPlatform iOS printed on
// stderr, byte for byte, in a locale with a decimal comma.
const xcodebuildOutput = "Finding content...\n" +
	"Downloading iOS 18.4 Universal Simulator (22E238): \r" +
	"Downloading iOS 18.4 Universal Simulator (22E238): Preparing to download...\r" +
	"Downloading iOS 18.4 Universal Simulator (22E238): 0,0% (73 kB of 8,86 GB)\r" +
	"Downloading iOS 18.4 Universal Simulator (22E238): 0,4% (39,4 MB of 8,86 GB)\r" +
	"Downloading iOS 18.4 Universal Simulator (22E238): 2,7% (235 MB of 8,86 GB)  \r" +
	"Downloading iOS 18.4 Universal Simulator (22E238): 9,7% (857,8 MB of 8,86 GB)"

// sdkmanagerOutput is sdkmanager --install redrawing its bar on stdout.
const sdkmanagerOutput = "[=======                                ] 20% Downloading x86_64-35_r09.zip...\r" +
	"[==================                     ] 45% Downloading x86_64-35_r09.zip...\r" +
	"[=======================================] 100% Unzipping... x86_64/system.img"

// fake is a Streamer that writes canned output in chunks of chunk bytes
// (all at once when 0) and exits with code.
type fake struct {
	stdout, stderr string
	chunk          int
	code           int
	err            error
}

func (f fake) Stream(ctx context.Context, _ runner.Cmd, stdout, stderr io.Writer) (int, error) {
	write := func(w io.Writer, s string) {
		n := f.chunk
		if n == 0 {
			n = len(s) + 1
		}
		for len(s) > 0 {
			k := min(n, len(s))
			w.Write([]byte(s[:k]))
			s = s[k:]
		}
	}
	write(stdout, f.stdout)
	write(stderr, f.stderr)
	return f.code, f.err
}

// run runs s and returns the percentages reported.
func run(t *testing.T, s Streamer) ([]float64, Result, error) {
	t.Helper()
	var got []float64
	res, err := Run(t.Context(), s, runner.Cmd{Path: "installer"}, func(p driver.InstallProgress) {
		if p.Step == driver.InstallFigures {
			got = append(got, p.Percent)
		}
	})
	return got, res, err
}

func TestProgressFromRecordedOutput(t *testing.T) {
	cases := []struct {
		name           string
		stdout, stderr string
		want           []float64
	}{
		{"xcodebuild on stderr with decimal commas", "", xcodebuildOutput, []float64{0, 0.4, 2.7, 9.7}},
		{"english decimal point", "Downloading iOS 26.4 Universal Simulator (23E244): 12.5% (1.1 GB of 8.86 GB)\n", "", []float64{12.5}},
		{"sdkmanager bars", sdkmanagerOutput, "", []float64{20, 45, 100}},
		{"the last of two on a line", "step 1 of 3 (33%): 50% done\n", "", []float64{50}},
		{"above 100 ignored", "101%\n250 %\n99 %\n", "", []float64{99}},
		{"no percentage", "Finding content...\nDone.\n", "Warning: something\n", nil},
		{"crlf is one line end", "10%\r\n20%\r\n", "", []float64{10, 20}},
		{"space before the sign", "at 7 % now\n", "", []float64{7}},
	}
	for _, tc := range cases {
		for _, chunk := range []int{0, 1, 7} {
			got, _, err := run(t, fake{stdout: tc.stdout, stderr: tc.stderr, chunk: chunk})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s (chunks of %d): progress %v, want %v", tc.name, chunk, got, tc.want)
			}
		}
	}
}

func TestPercent(t *testing.T) {
	for line, want := range map[string]float64{"0,0%": 0, "100%": 100, "x 3.25% y": 3.25, "5% then 6,5%": 6.5} {
		if got, ok := Percent(line); !ok || got != want {
			t.Errorf("Percent(%q) = %v, %v; want %v", line, got, ok, want)
		}
	}
	for _, line := range []string{"", "no number", "101%", "50 percent", "1000%"} {
		if got, ok := Percent(line); ok {
			t.Errorf("Percent(%q) = %v, want none", line, got)
		}
	}
}

// The output keeps both streams, line by line, for error messages and
// license checks; a non-zero exit is a result, not an error.
func TestOutputAndExitCode(t *testing.T) {
	_, res, err := run(t, fake{stdout: "Loading package information...\r\n", stderr: "Warning: License for package Google APIs ARM 64 v8a System Image not accepted.\n", code: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := "Loading package information...\nWarning: License for package Google APIs ARM 64 v8a System Image not accepted.\n"
	if res.Output != want || res.ExitCode != 1 {
		t.Errorf("Result = %q, %d; want %q, 1", res.Output, res.ExitCode, want)
	}
}

// A long run keeps only the end of its output, starting at a line.
func TestOutputIsBounded(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 3*MaxOutput; i++ {
		b.WriteString("[=====     ] 50% Downloading a rather long file name for the bar.zip...\r")
	}
	b.WriteString("the end\n")
	_, res, err := run(t, fake{stdout: b.String(), chunk: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) > MaxOutput || !strings.HasSuffix(res.Output, "the end\n") || !strings.HasPrefix(res.Output, "[=====") {
		t.Errorf("output of %d bytes, starting %q, ending %q", len(res.Output), res.Output[:20], res.Output[len(res.Output)-20:])
	}
}

// concurrent writes stdout's and stderr's lines from two goroutines at once,
// as runner.OS does.
type concurrent struct{ n int }

func (c concurrent) Stream(_ context.Context, _ runner.Cmd, stdout, stderr io.Writer) (int, error) {
	var wg sync.WaitGroup
	for i, w := range []io.Writer{stdout, stderr} {
		wg.Go(func() {
			for k := range c.n {
				// stdout prints 0-49, stderr 50-99.
				w.Write([]byte(strings.Repeat("x", k%5) + " " + strconv.Itoa(i*50+k%50) + "%\r"))
			}
		})
	}
	wg.Wait()
	return 0, nil
}

func TestProgressOneAtATimeInOrderPerStream(t *testing.T) {
	var (
		inside   int
		overlaps int
		got      []float64
	)
	_, err := Run(t.Context(), concurrent{n: 50}, runner.Cmd{}, func(pr driver.InstallProgress) {
		p := pr.Percent
		inside++
		if inside > 1 {
			overlaps++
		}
		got = append(got, p)
		inside--
	})
	if err != nil {
		t.Fatal(err)
	}
	if overlaps != 0 {
		t.Errorf("progress ran %d times while another call ran", overlaps)
	}
	var out, errs []float64
	for _, p := range got {
		if p < 50 {
			out = append(out, p)
		} else {
			errs = append(errs, p)
		}
	}
	if len(out) != 50 || len(errs) != 50 || !slices.IsSorted(out) || !slices.IsSorted(errs) {
		t.Errorf("progress per stream out of order or lost: stdout %v, stderr %v", out, errs)
	}
}

// A real program's output arrives through runner.OS.
func TestRealProcess(t *testing.T) {
	cmd := runner.Cmd{Path: "/bin/sh", Args: []string{"-c", `printf 'Downloading: 0,0%%\rDownloading: 12,5%%\r' >&2; printf '[==] 40%% x\r'; printf 'Downloading: 50,0%%\n' >&2; exit 3`}}
	var got []float64
	res, err := Run(t.Context(), runner.OS{}, cmd, func(p driver.InstallProgress) {
		if p.Step == driver.InstallFigures {
			got = append(got, p.Percent)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", res.ExitCode)
	}
	// Each stream's order is kept; between the two there is none.
	var stderr []float64
	for _, p := range got {
		if p != 40 {
			stderr = append(stderr, p)
		}
	}
	if !slices.Equal(stderr, []float64{0, 12.5, 50}) || !slices.Contains(got, 40) || len(got) != 4 {
		t.Errorf("progress %v, want 0 12.5 50 from stderr and 40 from stdout", got)
	}
	if !strings.Contains(res.Output, "Downloading: 12,5%\n") || !strings.Contains(res.Output, "[==] 40% x\n") {
		t.Errorf("output %q lacks a line", res.Output)
	}
}

// Ending ctx stops a real program that would run for a minute and reports
// that it was stopped, with what it printed so far.
func TestStoppedByContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := runner.Cmd{Path: "/bin/sh", Args: []string{"-c", `printf 'Downloading: 5,0%%\n' >&2; exec sleep 60`}}
	start := time.Now()
	res, err := Run(ctx, runner.OS{}, cmd, func(pr driver.InstallProgress) {
		p := pr.Percent
		if p == 5 {
			cancel()
		}
	})
	var stopped *StoppedError
	if !errors.As(err, &stopped) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v (%T), want a *StoppedError wrapping context.Canceled", err, err)
	}
	if !strings.Contains(err.Error(), "was ended before it finished") {
		t.Errorf("message %q", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("stopping took %s", took)
	}
	if !strings.Contains(res.Output, "5,0%") {
		t.Errorf("output %q lacks what was printed before the stop", res.Output)
	}
}

// A program that cannot start is the Streamer's error, not a stop.
func TestCannotStart(t *testing.T) {
	_, err := Run(t.Context(), runner.OS{}, runner.Cmd{Path: "simlock-no-such-installer"}, nil)
	var stopped *StoppedError
	if err == nil || errors.As(err, &stopped) {
		t.Errorf("err = %v, want a start failure", err)
	}
}

// A write the Streamer lets through after it returned never reaches
// progress.
type late struct{ w chan io.Writer }

func (l late) Stream(_ context.Context, _ runner.Cmd, stdout, _ io.Writer) (int, error) {
	l.w <- stdout
	return 0, nil
}

func TestNoProgressAfterReturn(t *testing.T) {
	l := late{w: make(chan io.Writer, 1)}
	calls := 0
	if _, err := Run(t.Context(), l, runner.Cmd{}, func(driver.InstallProgress) { calls++ }); err != nil {
		t.Fatal(err)
	}
	(<-l.w).Write([]byte("50%\n"))
	if calls != 0 {
		t.Errorf("progress called %d times after Run returned", calls)
	}
}

// A context ended with a cause reports both the cause and the context's
// own error.
func TestStoppedWithCause(t *testing.T) {
	cause := errors.New("the download budget ran out")
	ctx, cancel := context.WithCancelCause(t.Context())
	cmd := runner.Cmd{Path: "/bin/sh", Args: []string{"-c", `printf '1%%\n'; exec sleep 60`}}
	_, err := Run(ctx, runner.OS{}, cmd, func(driver.InstallProgress) { cancel(cause) })
	if !errors.Is(err, cause) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), cause.Error()) {
		t.Errorf("err = %v; want one wrapping %v and context.Canceled", err, cause)
	}
}

func TestSizeReadsTheDownloadedAndTotalBytes(t *testing.T) {
	for _, c := range []struct {
		line        string
		done, total int64
		ok          bool
	}{
		{"Downloading iOS 26.4 Simulator (23E244): 41.2% (3.6 GB of 8.9 GB)", 3_600_000_000, 8_900_000_000, true},
		{"[=====     ] 41% 120.5MB/1.2GB", 120_500_000, 1_200_000_000, true},
		{"got 512 KiB of 2 MiB", 512 << 10, 2 << 20, true},
		{"10 bytes of 100 bytes", 10, 100, true},
		{"9 GB of 3 GB", 0, 0, false},       // done past total: a misread
		{"41% done", 0, 0, false},           // no size
		{"2 GB of 2000000 TB", 0, 0, false}, // past any real download
	} {
		done, total, ok := Size(c.line)
		if done != c.done || total != c.total || ok != c.ok {
			t.Errorf("Size(%q) = %d, %d, %v; want %d, %d, %v", c.line, done, total, ok, c.done, c.total, c.ok)
		}
	}
}

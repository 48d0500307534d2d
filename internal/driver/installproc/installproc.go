// Package installproc runs a platform's installer program (xcodebuild
// -downloadPlatform, sdkmanager --install) and reports the percentages it
// prints as it goes.
//
// Installers draw progress bars by redrawing one line in place, so a line
// ends at "\n" or at a bare "\r", and both stdout and stderr are read:
// xcodebuild writes its progress to stderr, sdkmanager to stdout. On each
// line the last percentage counts ("2,7% (235 MB of 8,86 GB)" is 2.7, since
// xcodebuild follows the locale's decimal comma), and only values within
// 0-100 are reported.
package installproc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/runner"
)

// Streamer runs a program to completion, handing its output to stdout and
// stderr as the program writes it; the two writers may be called from two
// goroutines at once. When ctx ends it stops the program and returns an
// error. runner.OS is one: it sends SIGTERM, and SIGKILL when the program
// has not exited 5 s later.
type Streamer interface {
	Stream(ctx context.Context, cmd runner.Cmd, stdout, stderr io.Writer) (exitCode int, err error)
}

// MaxOutput bounds Result.Output: enough for any error message or license
// warning, not a download's whole log of redraws.
const MaxOutput = 64 << 10

// maxLine bounds one unfinished line; a program printing more without a
// line end has it cut there.
const maxLine = 16 << 10

// Result is what a finished installer left. A non-zero exit is a Result,
// not an error.
type Result struct {
	// Output is the end of stdout and stderr, one line per line the
	// program ended (a "\r" redraw included), in the order the lines
	// arrived; at most MaxOutput bytes.
	Output   string
	ExitCode int
}

// StoppedError is a run whose context ended before the program finished;
// the program was stopped. errors.Is finds both the context's error
// (context.Canceled, context.DeadlineExceeded) and its cause, when the
// context was given one.
type StoppedError struct {
	Cmd runner.Cmd
	// Cause is context.Cause of the run's context; CtxErr its Err.
	Cause, CtxErr error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("%s was ended before it finished: %v", e.Cmd, e.Cause)
}

func (e *StoppedError) Unwrap() []error {
	if e.Cause == e.CtxErr {
		return []error{e.Cause}
	}
	return []error{e.Cause, e.CtxErr}
}

// StopGrace is how long a stopped installer has to exit before it is
// killed.
const StopGrace = 10 * time.Second

// Run runs cmd with s and calls progress with every percentage the program
// prints, and with every other line that is not blank (an InstallLine),
// from one goroutine at a time, in the order printed within each of
// stdout and stderr, and never after Run returns. progress may be nil; it
// should return quickly, as the program's output waits for it.
//
// cmd.Timeout is honoured as by the Streamer, but installers usually run
// with none: a download takes as long as it takes, and ctx bounds it. When
// ctx ends the error is a *StoppedError, with the output so far in Result;
// a program that could not start is the Streamer's error.
func Run(ctx context.Context, s Streamer, cmd runner.Cmd, progress func(driver.InstallProgress)) (Result, error) {
	if progress == nil {
		progress = func(driver.InstallProgress) {}
	}
	if cmd.StopGrace == 0 {
		// An installer stopped mid-download gets time to clean up its
		// partial files before it is killed.
		cmd.StopGrace = StopGrace
	}
	c := &collector{progress: progress}
	stdout, stderr := &lineWriter{c: c, stream: "stdout"}, &lineWriter{c: c, stream: "stderr"}
	code, err := s.Stream(ctx, cmd, stdout, stderr)
	c.finish(stdout, stderr)
	res := Result{Output: string(lastBytes(c.tail, MaxOutput)), ExitCode: code}
	if err != nil && ctx.Err() != nil {
		return res, &StoppedError{Cmd: cmd, Cause: context.Cause(ctx), CtxErr: ctx.Err()}
	}
	return res, err
}

// percent is a percentage as installers print it; the regexp finds every
// one on a line, and the last counts.
var percent = regexp.MustCompile(`(\d{1,3}(?:[.,]\d+)?)\s*%`)

// Percent returns the last percentage within 0-100 printed on line, if
// there is one. A "," is read as a decimal point. Digits right after other
// digits are the tail of a larger number ("1000%"), not a percentage.
func Percent(line string) (float64, bool) {
	ms := percent.FindAllStringSubmatchIndex(line, -1)
	for i := len(ms) - 1; i >= 0; i-- {
		start, end := ms[i][2], ms[i][3]
		if start > 0 && line[start-1] >= '0' && line[start-1] <= '9' {
			continue
		}
		v, err := strconv.ParseFloat(strings.Replace(line[start:end], ",", ".", 1), 64)
		if err != nil || v < 0 || v > 100 {
			return 0, false
		}
		return v, true
	}
	return 0, false
}

// collector is what both streams' lines go to. Its mutex is what makes
// progress calls one at a time.
type collector struct {
	progress func(driver.InstallProgress)

	// mu guards the fields below and is held while progress runs.
	mu   sync.Mutex
	tail []byte
	// done is set once Run has flushed the last lines: a write the
	// Streamer lets through later (a copy it gave up waiting for) is
	// dropped, so progress is never called after Run returns.
	done bool
}

// lineLocked takes one finished line of stream. c.mu must be held.
func (c *collector) lineLocked(stream string, line []byte) {
	c.tail = append(c.tail, line...)
	c.tail = append(c.tail, '\n')
	// Trimming only past twice the bound keeps a flood of redraws from
	// copying the tail at every line.
	if len(c.tail) > 2*MaxOutput {
		c.tail = append([]byte(nil), lastBytes(c.tail, MaxOutput)...)
	}
	text := string(line)
	v, hasPct := Percent(text)
	done, total, hasSize := Size(text)
	switch {
	case hasPct && hasSize:
		c.progress(driver.InstallProgress{Percent: v, Bytes: done, Total: total, Line: text, Stream: stream})
	case hasPct:
		c.progress(driver.InstallProgress{Percent: v, Line: text, Stream: stream})
	case hasSize:
		// Sizes alone still say how far along it is.
		c.progress(driver.InstallProgress{Percent: float64(done) * 100 / float64(total), Bytes: done, Total: total, Line: text, Stream: stream})
	case len(bytes.TrimSpace(line)) > 0:
		c.progress(driver.InstallProgress{Step: driver.InstallLine, Line: text, Stream: stream})
	}
}

// size is "<done> <unit> of <total> <unit>" or "<done> <unit>/<total>
// <unit>", as installers print a download's progress ("3.6 GB of 8.9 GB",
// "120.5MB/1.2GB").
var size = regexp.MustCompile(`(?i)(\d+(?:[.,]\d+)?)\s*([KMGT]i?B|bytes|B)\s*(?:of|/)\s*(\d+(?:[.,]\d+)?)\s*([KMGT]i?B|bytes|B)\b`)

// Size returns the last download size printed on line, done and total in
// bytes, if there is one with done not past total. Units are decimal (a GB
// is 10^9 bytes) and binary with an i (a GiB is 2^30).
func Size(line string) (done, total int64, ok bool) {
	ms := size.FindAllStringSubmatch(line, -1)
	if len(ms) == 0 {
		return 0, 0, false
	}
	m := ms[len(ms)-1]
	done, ok1 := bytesOf(m[1], m[2])
	total, ok2 := bytesOf(m[3], m[4])
	if !ok1 || !ok2 || total <= 0 || done > total {
		return 0, 0, false
	}
	return done, total, true
}

// maxSize bounds a size read from an installer's output (1 PB).
const maxSize = 1e15

func bytesOf(num, unit string) (int64, bool) {
	v, err := strconv.ParseFloat(strings.Replace(num, ",", ".", 1), 64)
	if err != nil || v < 0 {
		return 0, false
	}
	scale := 1.0
	u := strings.ToUpper(unit)
	if u != "B" && u != "BYTES" {
		base := 1000.0
		if strings.Contains(u, "I") {
			base = 1024
		}
		scale = map[byte]float64{'K': base, 'M': base * base, 'G': base * base * base, 'T': base * base * base * base}[u[0]]
	}
	if v*scale > maxSize {
		return 0, false
	}
	return int64(v * scale), true
}

// lastBytes is the end of b, at most n bytes, starting at a line when one
// starts there, so that the first line kept is whole.
func lastBytes(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	b = b[len(b)-n:]
	if i := bytes.IndexByte(b, '\n'); i >= 0 && i+1 < len(b) {
		b = b[i+1:]
	}
	return b
}

// finish flushes the streams' unfinished last lines and closes the
// collector.
func (c *collector) finish(ws ...*lineWriter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range ws {
		if len(w.partial) > 0 {
			c.lineLocked(w.stream, w.partial)
			w.partial = nil
		}
	}
	c.done = true
}

// lineWriter splits one stream into lines for its collector.
type lineWriter struct {
	c      *collector
	stream string
	// The fields below are guarded by c.mu.
	partial []byte
	// afterCR: the last byte written was a "\r", which ended a line; a
	// "\n" right after it belongs to the same line end.
	afterCR bool
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.c.done {
		return len(p), nil
	}
	for _, b := range p {
		switch {
		case b == '\n' && w.afterCR:
			w.afterCR = false
		case b == '\n' || b == '\r':
			w.c.lineLocked(w.stream, w.partial)
			w.partial = w.partial[:0]
			w.afterCR = b == '\r'
		default:
			w.afterCR = false
			w.partial = append(w.partial, b)
			if len(w.partial) >= maxLine {
				w.c.lineLocked(w.stream, w.partial)
				w.partial = w.partial[:0]
			}
		}
	}
	return len(p), nil
}

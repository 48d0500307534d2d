package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/homedir"
	"github.com/simlock/simlock/internal/logfile"
)

// followEvery is how often daemon logs --follow looks for new lines.
const followEvery = 250 * time.Millisecond

func daemonLogsCmd(env Env) *cobra.Command {
	var follow bool
	var lines int
	var since string
	cmd := &cobra.Command{
		Use:   "logs [--follow] [--since <duration|time>] [--lines N]",
		Short: "Print the daemon log (works when the daemon is down)",
		Long: "Print the daemon log: its last --lines lines, or with --since every line from then on, " +
			"reaching back into the rotated files (daemon.log.1 to .3). --follow keeps printing new lines, " +
			"across a rotation, until interrupted. On a terminal each record is one readable line " +
			"(time, level, message, attributes); piped, or with --json, the JSON lines as written.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var from time.Time
			if since != "" {
				var err error
				if from, err = parseLogSince(since, time.Now()); err != nil {
					return err
				}
			}
			if lines < 0 {
				return usage("--lines must be 0 or more, got %d", lines)
			}
			home, err := env.home()
			if err != nil {
				return err
			}
			asJSON, _ := cmd.Flags().GetBool("json")
			out := logPrinter{w: env.Stdout, human: env.StdoutIsTerminal && !asJSON}
			path := filepath.Join(home, daemon.LogName)
			var offset int64
			if since != "" {
				offset, err = printSince(out, path, from)
			} else {
				offset, err = printTail(out, path, lines)
			}
			if err != nil {
				return fail(err)
			}
			if !follow {
				return nil
			}
			t := time.NewTicker(followEvery)
			defer t.Stop()
			return fail(followLog(cmd.Context(), out, path, offset, t.C))
		},
	}
	cmd.Flags().BoolVar(&follow, "follow", false, "keep printing new lines, across a rotation, until interrupted")
	cmd.Flags().IntVar(&lines, "lines", 100, "how many of the last lines to print (without --since)")
	cmd.Flags().StringVar(&since, "since", "", "print every line from this long ago (10m, 2h, 1d) or from this RFC 3339 time, reaching into the rotated files")
	return cmd
}

// parseLogSince reads --since: a duration before now (a number with ms,
// s, m, h or d) or an RFC 3339 time.
func parseLogSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(v)); err == nil {
		return t, nil
	}
	d, err := parseDuration(v)
	if err != nil || strings.Trim(strings.TrimSpace(v), "0123456789.") == "" {
		return time.Time{}, usage("--since %.40q is neither a duration before now (a number with ms, s, m, h or d, such as 10m) nor an RFC 3339 time (such as 2026-01-02T15:04:05Z)", v)
	}
	return now.Add(-d), nil
}

// logFiles are path's rotated files and path itself, oldest first.
func logFiles(path string) []string {
	files := make([]string, 0, logfile.Kept+1)
	for i := logfile.Kept; i >= 1; i-- {
		files = append(files, fmt.Sprintf("%s.%d", path, i))
	}
	return append(files, path)
}

// printSince prints every line of the log from the first record at or
// after from on, oldest file first, and returns the size of path read.
// A line that is not a record (no time) goes with the record before it.
func printSince(out logPrinter, path string, from time.Time) (int64, error) {
	printing := false
	var size int64
	for _, f := range logFiles(path) {
		b, err := homedir.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if f == path {
			size = int64(len(b))
		}
		for line := range strings.Lines(string(b)) {
			if !strings.HasSuffix(line, "\n") {
				if f == path {
					size -= int64(len(line)) // a partial line waits for its newline
				}
				break
			}
			if !printing {
				at, ok := recordTime(line)
				printing = ok && !at.Before(from)
			}
			if printing {
				if err := out.line(line); err != nil {
					return 0, err
				}
			}
		}
	}
	return size, nil
}

// recordTime is the time of a log record (its "time" field).
func recordTime(line string) (time.Time, bool) {
	var r struct {
		Time time.Time `json:"time"`
	}
	if json.Unmarshal([]byte(line), &r) != nil || r.Time.IsZero() {
		return time.Time{}, false
	}
	return r.Time, true
}

// printTail prints the last n lines of path and returns the size read (up
// to the last whole line).
func printTail(out logPrinter, path string, n int) (int64, error) {
	b, err := homedir.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	whole := b[:bytes.LastIndexByte(b, '\n')+1]
	all := strings.SplitAfter(string(whole), "\n")
	all = all[:len(all)-1] // after the last newline
	for _, line := range all[max(len(all)-n, 0):] {
		if err := out.line(line); err != nil {
			return 0, err
		}
	}
	return int64(len(whole)), nil
}

// followLog prints the lines appended to path from offset on, at each
// tick, until ctx ends. When the log rotates (path is another file now),
// the rest of the old file is printed, then the new one from its start; a
// file that shrank (truncated) is read again from its start.
func followLog(ctx context.Context, out logPrinter, path string, offset int64, tick <-chan time.Time) error {
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
		if f == nil {
			var err error
			if f, err = homedir.OpenFile(path, os.O_RDONLY, 0); err != nil {
				f = nil
				continue // not written yet
			}
		}
		cur, err := os.Stat(path)
		rotated := false
		if st, serr := f.Stat(); serr == nil {
			switch {
			case err == nil && !os.SameFile(st, cur):
				rotated = true
			case st.Size() < offset:
				offset = 0
			}
		}
		if offset, err = printFrom(out, f, offset); err != nil {
			return err
		}
		if rotated {
			f.Close()
			f, offset = nil, 0
			if f, err = homedir.OpenFile(path, os.O_RDONLY, 0); err != nil {
				f = nil
				continue
			}
			if offset, err = printFrom(out, f, 0); err != nil {
				return err
			}
		}
	}
}

// printFrom prints the whole lines of f from offset on and returns the
// offset after the last one.
func printFrom(out logPrinter, f *os.File, offset int64) (int64, error) {
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset, nil
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return offset, nil // a partial line waits for its newline
		}
		offset += int64(len(line))
		if err := out.line(line); err != nil {
			return offset, err
		}
	}
}

// logPrinter prints log lines: as written, or each record as one line for
// a person.
type logPrinter struct {
	w     io.Writer
	human bool
}

func (p logPrinter) line(line string) error {
	if p.human {
		line = humanRecord(line)
	}
	_, err := io.WriteString(p.w, line)
	return err
}

// humanRecord is a JSON log record as a person reads it: local time,
// level, message, then key=value for each attribute in the order written
// (values with spaces quoted, objects as JSON). A line that is not a
// record is kept as it is.
func humanRecord(line string) string {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return line
	}
	var at, level, msg string
	var attrs strings.Builder
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return line
		}
		key, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return line
		}
		var s string
		isString := json.Unmarshal(raw, &s) == nil
		switch {
		case key == "time" && isString:
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				s = t.Local().Format("2006-01-02 15:04:05.000")
			}
			at = s
		case key == "level" && isString:
			level = s
		case key == "msg" && isString:
			msg = s
		default:
			v := string(raw)
			if isString {
				v = s
				if s == "" || strings.ContainsAny(s, " \t\"=") || !isPrint(s) {
					v = fmt.Sprintf("%q", s)
				}
			}
			fmt.Fprintf(&attrs, " %s=%s", key, v)
		}
	}
	return fmt.Sprintf("%s %-5s %s%s\n", at, level, msg, attrs.String())
}

// isPrint reports whether s has no control characters, which a terminal
// would act on.
func isPrint(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

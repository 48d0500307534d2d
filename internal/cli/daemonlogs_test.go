package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// record is one daemon log line at t.
func record(t time.Time, msg string, attrs ...string) string {
	m := fmt.Sprintf(`{"time":%q,"level":"INFO","msg":%q`, t.Format(time.RFC3339Nano), msg)
	for i := 0; i+1 < len(attrs); i += 2 {
		m += fmt.Sprintf(`,%q:%q`, attrs[i], attrs[i+1])
	}
	return m + "}\n"
}

func TestLogSinceTakesADurationOrAnRFC3339TimeAndNothingElse(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"10m", now.Add(-10 * time.Minute)},
		{"2h", now.Add(-2 * time.Hour)},
		{"1d", now.Add(-24 * time.Hour)},
		{"1500ms", now.Add(-1500 * time.Millisecond)},
		{"2026-03-04T11:00:00Z", now.Add(-time.Hour)},
		{"2026-03-04T13:30:00.5+02:00", time.Date(2026, 3, 4, 11, 30, 0, 5e8, time.UTC)},
	} {
		got, err := parseLogSince(tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("parseLogSince(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "10", "-5m", "ten minutes", "2026-03-04", "2026-03-04 11:00:00", "5y", "1e3s"} {
		_, err := parseLogSince(bad, now)
		var ee *exitError
		if !asExit(err, &ee) || ee.code != 2 {
			t.Errorf("parseLogSince(%q) = %v, want a usage error (exit 2)", bad, err)
		}
	}
}

func asExit(err error, ee **exitError) bool {
	e, ok := err.(*exitError)
	*ee = e
	return ok
}

// runLogs runs `simlock daemon logs args` on home, stdout a terminal or not.
func runLogs(t *testing.T, home string, tty bool, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errOut, StdoutIsTerminal: tty, Getenv: func(k string) string {
		if k == "SIMLOCK_HOME" {
			return home
		}
		return ""
	}}
	code := Run(context.Background(), append([]string{"daemon", "logs"}, args...), env)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// --since reaches back into the rotated files, oldest first, and starts at
// the first record at or after its time; without it the last --lines of
// the live file print; a bad --since is a usage error.
func TestDaemonLogsSinceReadsTheRotatedFilesInOrder(t *testing.T) {
	home := t.TempDir()
	log := filepath.Join(home, "daemon.log")
	now := time.Now().UTC()
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	writeFile(t, log+".3", record(at(50*time.Minute), "oldest"))
	writeFile(t, log+".2", record(at(40*time.Minute), "older")+record(at(30*time.Minute), "old"))
	// .1 is missing: a log that rotated twice since .3 was dropped.
	writeFile(t, log, record(at(20*time.Minute), "recent")+"a line that is no record\n"+record(at(time.Minute), "newest")+`{"time":"partial`)

	msgs := func(out string) []string {
		var ms []string
		for line := range strings.Lines(out) {
			var r struct{ Msg string }
			if json.Unmarshal([]byte(line), &r) != nil {
				ms = append(ms, strings.TrimSpace(line))
				continue
			}
			ms = append(ms, r.Msg)
		}
		return ms
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "35m"}, "old|recent|a line that is no record|newest"},
		{[]string{"--since", "1h"}, "oldest|older|old|recent|a line that is no record|newest"},
		{[]string{"--since", at(25 * time.Minute).Format(time.RFC3339Nano)}, "recent|a line that is no record|newest"},
		{[]string{"--since", "10s"}, ""},
		{nil, "recent|a line that is no record|newest"},
		{[]string{"--lines", "1"}, "newest"},
	} {
		code, out, errOut := runLogs(t, home, false, tc.args...)
		if got := strings.Join(msgs(out), "|"); code != 0 || got != tc.want {
			t.Errorf("daemon logs %v: exit %d, printed %q, want %q\n%s", tc.args, code, got, tc.want, errOut)
		}
	}
	code, _, errOut := runLogs(t, home, false, "--since", "yesterday")
	if code != 2 || !strings.Contains(errOut, `"USAGE"`) || !strings.Contains(errOut, "--since") {
		t.Errorf("daemon logs --since yesterday: exit %d, stderr %s; want exit 2 with a USAGE error naming --since", code, errOut)
	}
	if code, out, _ := runLogs(t, t.TempDir(), false); code != 0 || out != "" {
		t.Errorf("daemon logs with no log: exit %d, printed %q; want nothing, exit 0", code, out)
	}
}

// On a terminal each record is one line: local time, level, message,
// then its attributes in the order written; --json prints the lines as
// written.
func TestDaemonLogsIsReadableOnATerminalAndAsWrittenWithJSON(t *testing.T) {
	home := t.TempDir()
	at := time.Date(2026, 3, 4, 12, 0, 0, 123e6, time.UTC)
	line := `{"time":"` + at.Format(time.RFC3339Nano) + `","level":"INFO","msg":"lease granted","pid":42,"module":"decisions","leaseId":"lse_1","requester":"agent a","spec":{"platform":"ios"}}` + "\n"
	writeFile(t, filepath.Join(home, "daemon.log"), line)
	want := at.Local().Format("2006-01-02 15:04:05.000") + ` INFO  lease granted pid=42 module=decisions leaseId=lse_1 requester="agent a" spec={"platform":"ios"}` + "\n"
	if _, out, _ := runLogs(t, home, true); out != want {
		t.Errorf("on a terminal:\n got %q\nwant %q", out, want)
	}
	if _, out, _ := runLogs(t, home, true, "--json"); out != line {
		t.Errorf("with --json on a terminal:\n got %q\nwant %q", out, line)
	}
	if _, out, _ := runLogs(t, home, false); out != line {
		t.Errorf("piped:\n got %q\nwant %q", out, line)
	}
}

// --follow prints what is appended, the rest of the old file when the log
// rotates and then the new file from its start, and a line only once it
// is whole.
func TestFollowingTheLogCarriesOnAcrossARotation(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "daemon.log")
	writeFile(t, path, "one\n")
	var out bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	tick := make(chan time.Time)
	done := make(chan error)
	go func() { done <- followLog(ctx, logPrinter{w: &out}, path, 4, tick) }()
	// step runs one pass of the loop: the send is taken when the last pass
	// is over, and a second send waits for this one to end.
	step := func() { tick <- time.Time{}; tick <- time.Time{} }
	appendTo := func(p, s string) {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	step()
	appendTo(path, "two\nthr")
	step()
	if out.String() != "two\n" {
		t.Fatalf("after an append: %q, want the whole line two only", out.String())
	}
	appendTo(path, "ee\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(path, "four\n")
	step()
	appendTo(path, "five\n")
	step()
	cancel()
	go func() {
		for range tick {
		}
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(tick)
	if want := "two\nthree\nfour\nfive\n"; out.String() != want {
		t.Errorf("followed %q, want %q", out.String(), want)
	}
}

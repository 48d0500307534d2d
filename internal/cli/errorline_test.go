package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/termtest"
)

// A failure is one line on stderr whose message reads as written: cobra's
// suggestion joined into the sentence, and no <, > or & escaped for HTML.
func TestAFailureIsOneLineWithItsMessageAsWritten(t *testing.T) {
	var out, errOut bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	if code := Run(context.Background(), []string{"statsu"}, env); code != 2 {
		t.Fatalf("an unknown command exited %d, want 2", code)
	}
	line := errOut.String()
	if strings.Count(line, "\n") != 1 {
		t.Fatalf("stderr is not one line: %q", line)
	}
	var e struct{ Error contract.Error }
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatal(err)
	}
	if want := `unknown command "statsu" for "simlock"; did you mean stats or status? See simlock --help`; e.Error.Message != want {
		t.Errorf("message %q, want %q", e.Error.Message, want)
	}

	var b bytes.Buffer
	printError(&b, contract.Errorf(contract.CodeUsage, "give --lease <id> & a command"), false)
	if !strings.Contains(b.String(), `give --lease <id> & a command`) {
		t.Errorf("printed %q, want <, > and & as they are", b.String())
	}
}

// Each failure a person commonly meets, rendered for a terminal (one
// sentence, its code, the next step) and for a program (one JSON line with
// the next step as a detail).
func TestErrorRenderingsGolden(t *testing.T) {
	// As decoded from the daemon's answer: numbers are float64.
	ttl := &exitError{code: 2, err: &contract.Error{Code: contract.CodeBadRequest,
		Message: "ttlMs: must be at most lease.maxTtlMs (14400000), got 18000000",
		Details: map[string]any{"field": "ttlMs", "maxTtlMs": float64(14_400_000)}}}
	model := &exitError{code: 2, err: &contract.Error{Code: contract.CodeBadRequest,
		Message: "model: must be at most 128 characters", Details: map[string]any{"field": "model"}}}
	given := map[string][2]string{"ttlMs": {"--ttl", "5h"}, "model": {"--device", "iPhone 99 Ultra Max"}}
	long := &exitError{code: 2, err: &contract.Error{Code: contract.CodeBadRequest,
		Message: "model: must be at most 128 characters", Details: map[string]any{"field": "model"}}}
	errs := []error{
		inFlagTerms(ttl, given),
		inFlagTerms(model, given),
		inFlagTerms(long, map[string][2]string{"model": {"--device", strings.Repeat("x", 200)}}),
		contract.Errorf(contract.CodeNoCapacity, "no ios device is free and capacity is full").With("platform", "ios"),
		contract.Errorf(contract.CodeNoCapacity, "maintenance (nuke) in progress; try again").With("maintenance", true),
		contract.Errorf(contract.CodeQueueTimeout, "no device was free within 30s").With("requestId", "req_1"),
		contract.Errorf(contract.CodeUnknownModel, "ios has no model \"iPhone 99\"").With("platform", "ios").With("model", "iPhone 99"),
		contract.Errorf(contract.CodeRuntimeMissing, "iOS 26.4 is not installed").With("platform", "ios").With("osVersion", "26.4").With("downloadable", true),
		contract.Errorf(contract.CodeRequesterAlreadyLeased, "agent-1 already holds lease lse_1; release it first").With("existingLeaseId", "lse_1"),
		contract.Errorf(contract.CodeUsage, "unknown command \"statsu\" for \"simlock\"; did you mean status? See simlock --help"),
		contract.Errorf(contract.CodeInternal, "a message\nover two lines"),
	}
	for _, human := range []bool{true, false} {
		var b bytes.Buffer
		for _, err := range errs {
			var ee *exitError
			if errors.As(err, &ee) {
				err = ee.err
			}
			printError(&b, err, human)
		}
		if strings.Count(b.String(), "\n") != len(errs) {
			t.Errorf("human=%v: %d errors printed %d lines, want one each:\n%s", human, len(errs), strings.Count(b.String(), "\n"), b.String())
		}
		name := "errors-json"
		if human {
			name = "errors-tty"
		}
		termtest.Golden(t, name, b.Bytes())
	}
}

// On a terminal a failure is a sentence; with --json, or when stderr is not
// a terminal, the same failure is a JSON line.
func TestAFailureIsASentenceOnATerminalAndJSONElsewhere(t *testing.T) {
	run := func(tty bool, args ...string) string {
		var out, errOut bytes.Buffer
		env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }, StderrIsTerminal: tty}
		if code := Run(context.Background(), args, env); code != 2 {
			t.Fatalf("%v exited %d, want 2", args, code)
		}
		return errOut.String()
	}
	want := "✗ unknown command \"statsu\" for \"simlock\"; did you mean stats or status? See simlock --help [USAGE]\n"
	if got := run(true, "statsu"); got != want {
		t.Errorf("on a terminal: %q, want %q", got, want)
	}
	for _, got := range []string{run(false, "statsu"), run(true, "--json", "statsu")} {
		if !json.Valid([]byte(got)) || !strings.HasPrefix(got, `{"error":{"code":"USAGE"`) {
			t.Errorf("not a JSON error line: %q", got)
		}
	}
}

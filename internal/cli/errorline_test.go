package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
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
	if want := `unknown command "statsu" for "simlock"; did you mean status? See simlock --help`; e.Error.Message != want {
		t.Errorf("message %q, want %q", e.Error.Message, want)
	}

	var b bytes.Buffer
	printError(&b, contract.Errorf(contract.CodeUsage, "give --lease <id> & a command"))
	if !strings.Contains(b.String(), `give --lease <id> & a command`) {
		t.Errorf("printed %q, want <, > and & as they are", b.String())
	}
}

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/contract"
)

// A refusal naming a wire field is said in the terms of the flag typed for
// it, on every command, through one table: the value typed when the flag was
// given, the flag alone when it was not, and nothing restated for a field
// whose value came from the environment.
func TestARefusalNamesTheFlagNotTheWireField(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lease"}, "--platform is required (ios or android)"},
		{[]string{"lease", "--platform", "winphone"}, `--platform winphone: must be ios or android, got "winphone"`},
		{[]string{"lease", "--platform", "ios", "--class", "laptop"}, `--class laptop: must be one of phone, tablet, watch, tv, vision, auto, desktop; got "laptop"`},
	} {
		var out, errOut bytes.Buffer
		env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
		if code := Run(context.Background(), c.args, env); code != 2 {
			t.Errorf("%v exited %d, want 2: %s", c.args, code, errOut.String())
			continue
		}
		var e struct{ Error contract.Error }
		if err := json.Unmarshal(errOut.Bytes(), &e); err != nil {
			t.Fatalf("%v: stderr %q: %v", c.args, errOut.String(), err)
		}
		if e.Error.Message != c.want || e.Error.Details["flag"] == nil {
			t.Errorf("%v: %q %v, want %q with its flag", c.args, e.Error.Message, e.Error.Details, c.want)
		}
	}

	cmd := &cobra.Command{Use: "x"}
	cmd.Flags().String("agent-id", "", "")
	refusal := func() error {
		return fail(contract.BadRequest("principal", "must be 1 to 256 characters with no control characters"))
	}
	if err := inCommandFlags(cmd, refusal()); !sameMessage(err, "principal: must be 1 to 256 characters with no control characters") {
		t.Errorf("an identity from the environment was restated as --agent-id: %v", err)
	}
	_ = cmd.Flags().Set("agent-id", "bad\x01id")
	if err := inCommandFlags(cmd, refusal()); !sameMessage(err, "--agent-id bad\x01id: must be 1 to 256 characters with no control characters") {
		t.Errorf("a refused --agent-id: %v", err)
	}
}

func sameMessage(err error, want string) bool {
	var ee *exitError
	return errors.As(err, &ee) && contract.AsError(ee.err).Message == want
}

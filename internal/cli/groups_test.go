package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/contract"
)

// Every group of the command tree (at any depth) refuses a subcommand it
// does not have with USAGE, exit 2, suggesting the one a typo meant, and
// runs nothing: a misspelt `simlock daemon stpo` in a script fails instead
// of printing help and passing. The groups are read off the tree, so a
// group added later is tested too; the ones a person meets first are named
// so that none can drop out of the walk unseen.
func TestEveryGroupRefusesAnUnknownSubcommand(t *testing.T) {
	root := newRoot(Env{Getenv: func(string) string { return "" }})
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.HasSubCommands() && c != root {
			groups = append(groups, path)
		}
		for _, sub := range c.Commands() {
			walk(sub, append(slices.Clone(path), sub.Name()))
		}
	}
	walk(root, nil)
	for _, named := range []string{"daemon", "token", "component", "config", "worker", "job", "demo", "lease", "completion"} {
		if !slices.ContainsFunc(groups, func(p []string) bool { return len(p) == 1 && p[0] == named }) {
			t.Errorf("%s is not a group of the tree", named)
		}
	}
	for _, path := range groups {
		c, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		want := c.Commands()[0].Name()
		typo := []byte(want)
		typo[0], typo[1] = typo[1], typo[0] // "stop" → "tsop"
		name := strings.Join(path, " ")
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
			code := Run(context.Background(), append(slices.Clone(path), string(typo)), env)
			if code != 2 {
				t.Fatalf("simlock %s %s exited %d, want 2 (stdout %q, stderr %q)", name, typo, code, out.String(), errOut.String())
			}
			if out.Len() != 0 {
				t.Errorf("simlock %s %s printed to stdout: %q", name, typo, out.String())
			}
			var e struct{ Error contract.Error }
			if err := json.Unmarshal(errOut.Bytes(), &e); err != nil {
				t.Fatalf("stderr %q: %v", errOut.String(), err)
			}
			if e.Error.Code != contract.CodeUsage {
				t.Errorf("code %s, want USAGE", e.Error.Code)
			}
			prefix := `unknown command "` + string(typo) + `" for "simlock ` + name + `"; did you mean `
			if !strings.HasPrefix(e.Error.Message, prefix) || !strings.Contains(e.Error.Message, want) {
				t.Errorf("message %q, want it to start %q and suggest %s", e.Error.Message, prefix, want)
			}
		})
	}
}

// A group with no subcommand named still prints its help and succeeds.
func TestAGroupAlonePrintsItsHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	if code := Run(context.Background(), []string{"daemon"}, env); code != 0 {
		t.Fatalf("simlock daemon exited %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "simlock daemon [command]") {
		t.Errorf("simlock daemon printed %q, want its help", out.String())
	}
}

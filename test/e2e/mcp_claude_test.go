package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testtool"
)

// claudeBound bounds each run of the claude CLI.
const claudeBound = 60 * time.Second

// claudeDocConfig is docs/CLI.md's Claude Code config, as the doc writes
// it: the `claude mcp add` line of the simlock mcp section, split into
// words, and the .mcp.json the doc says it writes.
func claudeDocConfig(t *testing.T) (args []string, sample any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "docs", "CLI.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## simlock mcp\n")
	if start < 0 {
		t.Fatal("docs/CLI.md has no simlock mcp section")
	}
	section := doc[start+1:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	m := regexp.MustCompile("(?ms)^```sh\n(claude mcp add [^\n]*)\n```\n.*?^```json\n(.*?)^```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("the simlock mcp section of docs/CLI.md has no ```sh block with a `claude mcp add` line followed by a ```json sample")
	}
	// The line is plain words: a quote or an expansion would need a shell
	// to read it as the reader's shell does.
	if strings.ContainsAny(m[1], `'"$\`+"`") {
		t.Fatalf("the doc's line %q has shell quoting or expansions; the test splits plain words only", m[1])
	}
	if err := json.Unmarshal([]byte(m[2]), &sample); err != nil {
		t.Fatalf("the doc's .mcp.json sample does not parse: %v\n%s", err, m[2])
	}
	return strings.Fields(m[1]), sample
}

// claudeEnv is the environment the claude CLI runs with: this process's
// without simlock's, Claude Code's or Anthropic's variables (no session, no
// credential), a home of its own, the binary under test first on PATH, and
// no automatic update or other traffic the test does not need.
func claudeEnv(t *testing.T, simlockHome string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "SIMLOCK_"), strings.HasPrefix(name, "CLAUDE"), strings.HasPrefix(name, "ANTHROPIC_"),
			strings.HasPrefix(name, "CODEX_"), name == "HOME", name == "PATH":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+t.TempDir(), "SIMLOCK_HOME="+simlockHome,
		"PATH="+filepath.Dir(simlockBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
}

// docs/CLI.md's Claude Code line, run exactly as written where the claude
// CLI is installed, writes the .mcp.json the doc shows, and once the
// project's server is approved (as the doc says), `claude mcp list` starts
// `simlock mcp` from it and sees it connected. The doc's line and sample
// are read from the doc, so the doc and this test cannot drift.
func TestClaudeCodeMCPConfigWorksAsTheDocWritesIt(t *testing.T) {
	t.Parallel()
	args, sample := claudeDocConfig(t)
	claude := testtool.Find(t, "install it with npm (npm install -g @anthropic-ai/claude-code)", "claude")
	h := newHome(t)
	// A project is a git repository: Claude Code reads a project's
	// .claude/settings.local.json only in one.
	project := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", project).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	env := claudeEnv(t, h.Dir)
	runClaude := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), claudeBound)
		defer cancel()
		cmd := exec.CommandContext(ctx, claude, args...)
		cmd.Dir, cmd.Env = project, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("claude %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	if args[0] != "claude" {
		t.Fatalf("the doc's line starts %q", args[0])
	}
	runClaude(args[1:]...)
	b, err := os.ReadFile(filepath.Join(project, ".mcp.json"))
	if err != nil {
		t.Fatalf("the doc's line wrote no .mcp.json: %v", err)
	}
	var written any
	if err := json.Unmarshal(b, &written); err != nil {
		t.Fatalf("the written .mcp.json does not parse: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(written, sample) {
		t.Errorf("claude mcp add wrote\n%s\nbut docs/CLI.md shows\n%v", b, sample)
	}

	// The approval the doc names, then the server as Claude Code starts it.
	if err := os.MkdirAll(filepath.Join(project, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, ".claude", "settings.local.json"), []byte(`{"enabledMcpjsonServers":["simlock"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	list := runClaude("mcp", "list")
	line := ""
	for l := range strings.Lines(list) {
		if strings.HasPrefix(l, "simlock:") {
			line = l
		}
	}
	if !strings.Contains(line, "simlock mcp") || !strings.Contains(line, "Connected") {
		t.Errorf("claude mcp list does not show the simlock server connected:\n%s", list)
	}
}

// docs/MCP.md's Claude Code line for a remote daemon or gateway, run as the
// doc writes it (its example URL replaced by a real daemon's, the token in
// SIMLOCK_TOKEN), makes Claude Code reach the daemon's /mcp over
// Streamable HTTP with the bearer token: `claude mcp list` sees it
// connected.
func TestClaudeCodeConnectsOverHTTPAsTheDocWritesIt(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "docs", "MCP.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?ms)^```sh example\n(claude mcp add --transport http .*?)^```").FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("docs/MCP.md has no ```sh example block with a `claude mcp add --transport http` line")
	}
	const docURL = "https://gateway.example:4700"
	if !strings.Contains(m[1], docURL+"/mcp") {
		t.Fatalf("the doc's line does not name %s/mcp:\n%s", docURL, m[1])
	}
	claude := testtool.Find(t, "install it with npm (npm install -g @anthropic-ai/claude-code)", "claude")
	h, a := httpHome(t)
	_, secret := h.token("agent", "claude-code-http")
	project := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", project).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	env := append(claudeEnv(t, h.Dir), "SIMLOCK_TOKEN="+secret, "PATH="+filepath.Dir(claude)+string(os.PathListSeparator)+os.Getenv("PATH"))
	run := func(name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), claudeBound)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = project, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("sh", "-c", strings.ReplaceAll(m[1], docURL, a.base))
	list := run(claude, "mcp", "list")
	line := ""
	for l := range strings.Lines(list) {
		if strings.HasPrefix(l, "simlock:") {
			line = l
		}
	}
	if !strings.Contains(line, a.base+"/mcp") || !strings.Contains(line, "Connected") {
		t.Errorf("claude mcp list does not show simlock's /mcp connected:\n%s", list)
	}
}

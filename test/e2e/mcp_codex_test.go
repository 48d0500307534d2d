package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/testtool"
)

// codexDocConfigs are docs/MCP.md's two Codex configs, as the doc writes
// them: the ```toml blocks of its Codex paragraph, over HTTP then over
// stdio.
func codexDocConfigs(t *testing.T) (http, stdio string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "docs", "MCP.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "**Codex**")
	if start < 0 {
		t.Fatal("docs/MCP.md has no **Codex** paragraph")
	}
	blocks := regexp.MustCompile("(?ms)^```toml\n(.*?)^```").FindAllStringSubmatch(doc[start:], 2)
	if len(blocks) != 2 {
		t.Fatalf("docs/MCP.md's Codex paragraph has %d ```toml blocks, want the HTTP one and the stdio one", len(blocks))
	}
	return blocks[0][1], blocks[1][1]
}

// docs/MCP.md's Codex configs, written to a Codex home exactly as the doc
// writes them, are read by the real Codex CLI as the doc says: a
// Streamable HTTP server at the gateway's /mcp with the token from
// SIMLOCK_TOKEN, and a stdio server that runs `simlock mcp`.
func TestCodexReadsTheMCPConfigsAsTheDocWritesThem(t *testing.T) {
	t.Parallel()
	codex := testtool.Find(t, "install it with npm (npm install -g @openai/codex)", "codex")
	httpConf, stdioConf := codexDocConfigs(t)

	get := func(conf string) map[string]any {
		t.Helper()
		codexHome := t.TempDir()
		if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), commandBound)
		defer cancel()
		cmd := exec.CommandContext(ctx, codex, "mcp", "get", "simlock", "--json")
		cmd.Env = append(os.Environ(), "CODEX_HOME="+codexHome, "HOME="+t.TempDir())
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("codex mcp get simlock --json with the doc's config: %v\n%s\n%s", err, out, conf)
		}
		var got struct {
			Transport map[string]any `json:"transport"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("codex mcp get printed no JSON: %v\n%s", err, out)
		}
		return got.Transport
	}

	if tr := get(httpConf); tr["type"] != "streamable_http" || !strings.HasSuffix(tr["url"].(string), "/mcp") || tr["bearer_token_env_var"] != "SIMLOCK_TOKEN" {
		t.Errorf("Codex reads the doc's HTTP config as %v; want a streamable_http server at …/mcp with its bearer token from SIMLOCK_TOKEN", tr)
	}
	tr := get(stdioConf)
	args, _ := tr["args"].([]any)
	if tr["type"] != "stdio" || tr["command"] != "simlock" || len(args) != 1 || args[0] != "mcp" {
		t.Errorf("Codex reads the doc's stdio config as %v; want the command simlock mcp", tr)
	}
}

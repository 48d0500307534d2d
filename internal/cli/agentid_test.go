package cli

import "testing"

func TestMCPAgentIDPrefersTheNamedAgentThenTheSession(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cases := []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"SIMLOCK_AGENT_ID": "a1", "CLAUDE_CODE_SESSION_ID": "s1"}, "a1"},
		{map[string]string{"CLAUDE_CODE_SESSION_ID": "s1", "CODEX_THREAD_ID": "c1"}, "claude-code:s1"},
		{map[string]string{"CODEX_THREAD_ID": "c1"}, "codex:c1"},
		{nil, "mcp:42"},
	}
	for _, c := range cases {
		if got := mcpAgentID(env(c.vars), 42); got != c.want {
			t.Errorf("mcpAgentID(%v) = %q, want %q", c.vars, got, c.want)
		}
	}
}

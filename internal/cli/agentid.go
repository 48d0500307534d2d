package cli

import "strconv"

// agentID picks the requester identity: the flag, then the session's
// (sessionAgentID), then one derived from the parent process (so every
// shell or agent process gets its own).
func agentID(flag string, getenv func(string) string, ppid int) string {
	if flag != "" {
		return flag
	}
	if id := sessionAgentID(getenv); id != "" {
		return id
	}
	return "pid:" + strconv.Itoa(ppid)
}

// sessionAgentID is the identity the environment gives: SIMLOCK_AGENT_ID,
// then a Claude Code session id or a Codex thread id, or "" when there is none. The CLI
// and the MCP server both take it, so an agent's commands and its MCP tools
// are one requester.
func sessionAgentID(getenv func(string) string) string {
	switch {
	case getenv("SIMLOCK_AGENT_ID") != "":
		return getenv("SIMLOCK_AGENT_ID")
	case getenv("CLAUDE_CODE_SESSION_ID") != "":
		return "claude-code:" + getenv("CLAUDE_CODE_SESSION_ID")
	case getenv("CODEX_THREAD_ID") != "":
		return "codex:" + getenv("CODEX_THREAD_ID")
	}
	return ""
}

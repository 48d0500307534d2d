package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// parseDuration reads a duration with unit ms, s, m, h or d; a bare number
// is milliseconds.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	num, unit := s, time.Millisecond
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, unit = strings.TrimSuffix(s, u.suffix), u.unit
			break
		}
	}
	if num == "" || strings.Trim(num, "0123456789.") != "" { // no sign, exponent, inf or nan
		return 0, fmt.Errorf("%q is not a duration (use a number with ms, s, m, h or d)", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%q is not a duration (use a number with ms, s, m, h or d)", s)
	}
	d := f * float64(unit)
	if d > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too long", s)
	}
	return time.Duration(d), nil
}

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

package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// `simlock mcp` with SIMLOCK_URL refuses, before it reads stdin, a URL
// that is not a daemon's base URL (by the one rule every remote command
// uses, apiclient.ParseURL) and a missing token: a usage error
// (exit 2) on stderr, nothing on stdout, which carries JSON-RPC only.
func TestMCPRelayRefusesABadURLOrAMissingToken(t *testing.T) {
	for _, c := range []struct {
		name, url, token, want string
	}{
		{"no token", "http://gateway.example:4700", "", "SIMLOCK_TOKEN"},
		{"not http", "ftp://gateway.example", "s3cret", "http:// or https://"},
		{"a path", "http://gateway.example:4700/mcp", "s3cret", "base URL"},
		{"no host", "http://", "s3cret", "names no host"},
	} {
		var out, errOut bytes.Buffer
		vars := map[string]string{"SIMLOCK_URL": c.url, "SIMLOCK_TOKEN": c.token, "SIMLOCK_HOME": t.TempDir()}
		env := Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] }}
		code := Run(context.Background(), []string{"mcp"}, env)
		if code != 2 || out.Len() != 0 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 saying %q on stderr only", c.name, code, out.String(), errOut.String(), c.want)
		}
	}
}

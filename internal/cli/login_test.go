package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemontest"
)

// cliEnv is an Env for a test: its variables from vars, no terminal.
func cliEnv(stdin string, vars map[string]string) (Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return Env{
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string { return vars[k] }, Version: "test",
	}, &out, &errOut
}

// simlock login checks the token against the server before it stores it
// 0600, prints neither the token nor anything of it, and a profile it
// stored makes status speak HTTP; SIMLOCK_URL wins over it; logout
// removes it.
func TestLoginStoresAProfileThatStatusUsesAndLogoutRemoves(t *testing.T) {
	d := daemontest.Start(t, daemontest.Set("http.enabled", "true", "http.port", "0"))
	var tok contract.TokenCreateResult
	if err := d.Admin().Call(context.Background(), contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenAgent}, &tok); err != nil {
		t.Fatal(err)
	}
	cfg := t.TempDir()
	vars := map[string]string{"XDG_CONFIG_HOME": cfg, "SIMLOCK_HOME": filepath.Join(t.TempDir(), "none")}
	profile := filepath.Join(cfg, "simlock", "remote.json")

	env, out, errOut := cliEnv("wrong-token\n", vars)
	if code := Run(t.Context(), []string{"login", d.HTTPURL()}, env); code != contract.CodeUnauthenticated.ExitCode() || !strings.Contains(errOut.String(), "UNAUTHENTICATED") {
		t.Fatalf("login with a wrong token exited %d: %s", code, errOut)
	}
	if _, err := os.Stat(profile); !os.IsNotExist(err) {
		t.Fatalf("a refused token was stored: %v", err)
	}

	env, out, errOut = cliEnv(tok.Secret+"\n", vars)
	if code := Run(t.Context(), []string{"login", d.HTTPURL()}, env); code != 0 {
		t.Fatalf("login exited %d: %s", code, errOut)
	}
	if strings.Contains(out.String()+errOut.String(), tok.Secret) {
		t.Fatalf("login printed the token: %s %s", out, errOut)
	}
	st, err := os.Stat(profile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the profile: %v, mode %v; want 0600", err, st.Mode().Perm())
	}

	// status now speaks HTTP (no daemon runs for SIMLOCK_HOME).
	env, out, errOut = cliEnv("", vars)
	if code := Run(t.Context(), []string{"status", "--json"}, env); code != 0 {
		t.Fatalf("status through the stored profile exited %d: %s", code, errOut)
	}
	var s contract.Status
	if err := json.Unmarshal(out.Bytes(), &s); err != nil || s.Daemon.Version != "test" {
		t.Fatalf("status through the profile: %v %s", err, out)
	}

	// SIMLOCK_URL wins over the stored profile.
	envVars := map[string]string{"SIMLOCK_URL": "http://127.0.0.1:1", "XDG_CONFIG_HOME": cfg}
	env, _, errOut = cliEnv("", envVars)
	if code := Run(t.Context(), []string{"status"}, env); code != contract.CodeDaemonConnectionLost.ExitCode() || !strings.Contains(errOut.String(), "127.0.0.1:1") {
		t.Fatalf("status with SIMLOCK_URL set exited %d: %s; want it to reach SIMLOCK_URL", code, errOut)
	}

	env, _, errOut = cliEnv("", vars)
	if code := Run(t.Context(), []string{"logout"}, env); code != 0 {
		t.Fatalf("logout exited %d: %s", code, errOut)
	}
	if _, err := os.Stat(profile); !os.IsNotExist(err) {
		t.Fatalf("logout left the profile: %v", err)
	}
}

// While a profile is active, a command that manages the local machine
// refuses with USAGE and says why.
func TestLocalOnlyCommandsRefuseWithARemoteProfile(t *testing.T) {
	vars := map[string]string{"SIMLOCK_URL": "http://127.0.0.1:1", "XDG_CONFIG_HOME": t.TempDir(), "SIMLOCK_HOME": filepath.Join(t.TempDir(), "h")}
	for _, args := range [][]string{{"daemon", "stop"}, {"nuke", "--yes"}, {"doctor", "--fix"}, {"service", "status"}, {"token", "list"}} {
		env, _, errOut := cliEnv("", vars)
		if code := Run(t.Context(), args, env); code != 2 || !strings.Contains(errOut.String(), "remote profile is active") {
			t.Errorf("simlock %s with SIMLOCK_URL: exit %d, %s; want USAGE saying a remote profile is active", strings.Join(args, " "), code, errOut)
		}
	}
}

package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemontest"
)

// simlock login and SIMLOCK_URL take a gateway's replicas as a list: the
// profile keeps the list, and a command reaches the replica that answers
// past one that does not. An item that is not a base URL is refused.
func TestLoginAndSIMLOCKURLTakeAListOfReplicas(t *testing.T) {
	d := daemontest.Start(t, daemontest.Set("http.enabled", "true", "http.port", "0"))
	var tok contract.TokenCreateResult
	if err := d.Admin().Call(context.Background(), contract.OpTokenCreate, contract.TokenCreateInput{Role: contract.TokenAgent}, &tok); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	cfg := t.TempDir()
	vars := map[string]string{"XDG_CONFIG_HOME": cfg, "SIMLOCK_HOME": filepath.Join(t.TempDir(), "none")}

	env, _, errOut := cliEnv(tok.Secret+"\n", vars)
	if code := Run(t.Context(), []string{"login", dead + "/," + d.HTTPURL() + "/,ftp://x"}, env); code != contract.CodeUsage.ExitCode() || !strings.Contains(errOut.String(), "ftp://x") {
		t.Fatalf("login with an ftp:// item exited %d: %s; want USAGE naming it", code, errOut)
	}

	env, _, errOut = cliEnv(tok.Secret+"\n", vars)
	if code := Run(t.Context(), []string{"login", dead + "/, " + d.HTTPURL() + "/"}, env); code != 0 {
		t.Fatalf("login to a list whose first replica is dead exited %d: %s", code, errOut)
	}
	b, err := os.ReadFile(filepath.Join(cfg, "simlock", "remote.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p remoteProfile
	if err := json.Unmarshal(b, &p); err != nil || p.URL != dead+","+d.HTTPURL() {
		t.Fatalf("stored profile %s (%v), want the URL list %s,%s", b, err, dead, d.HTTPURL())
	}

	vars["SIMLOCK_URL"], vars["SIMLOCK_TOKEN"] = dead+","+d.HTTPURL(), tok.Secret
	env, out, errOut := cliEnv("", vars)
	if code := Run(t.Context(), []string{"status", "--json"}, env); code != 0 {
		t.Fatalf("status with SIMLOCK_URL a list whose first replica is dead exited %d: %s", code, errOut)
	}
	var s contract.Status
	if err := json.Unmarshal(out.Bytes(), &s); err != nil || s.Daemon.Version != "test" {
		t.Fatalf("status through the list: %v %s", err, out)
	}
}

package e2e

import (
	"bytes"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/appbundle/apptest"
	"github.com/simlock/simlock/internal/shimtest"
)

// Device tools end to end: the real binary's HTTP routes and CLI commands
// on the demo driver, directly and through a gateway, with a hostile
// caller that changes nothing.

// toolLog is the lease's device log as its holder reads it over HTTP.
func toolLog(t *testing.T, a *api, secret, lease, query string) []string {
	t.Helper()
	r := a.do("GET", "/v1/leases/"+lease+"/logs"+query, secret, "")
	if r.status != 200 {
		t.Fatalf("logs: %d %s", r.status, r.raw)
	}
	var out []string
	for _, l := range r.body["lines"].([]any) {
		out = append(out, l.(string))
	}
	return out
}

// exerciseTools runs every device tool route on lease as its holder, then
// each as another agent (refused as an unknown lease, and nothing of it on
// the device's log).
func exerciseTools(t *testing.T, a *api, holder, other, lease, appID string, app []byte) {
	t.Helper()
	base := "/v1/leases/" + lease
	if r := a.do("POST", base+"/launch", holder, `{"appId":"`+appID+`"}`); r.status != 404 || r.errCode() != "APP_NOT_INSTALLED" {
		t.Errorf("launch before install: %d %s", r.status, r.raw)
	}
	if r := a.send("POST", base+"/apps", holder, bytes.NewReader(app), int64(len(app))); r.status != 200 {
		t.Fatalf("install: %d %s", r.status, r.raw)
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/launch", `{"appId":"` + appID + `"}`, `"appId":"` + appID + `"`},
		{"POST", "/open-url", `{"url":"myapp://item/1?q=a;b"}`, `"url":"myapp://item/1?q=a;b"`},
		{"PUT", "/location", `{"latitude":48.8584,"longitude":2.2945}`, `"latitude":48.8584`},
		{"PUT", "/appearance", `{"appearance":"dark"}`, `"appearance":"dark"`},
		{"POST", "/terminate", `{"appId":"` + appID + `"}`, `"appId":"` + appID + `"`},
	} {
		if r := a.do(c.method, base+c.path, holder, c.body); r.status != 200 || !strings.Contains(r.raw, c.want) {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.raw)
		}
	}
	lines := toolLog(t, a, holder, lease, "?lines=5000")
	all := strings.Join(lines, "\n")
	for _, want := range []string{"launched " + appID, "opened myapp://item/1?q=a;b", "location set to 48.8584,2.2945", "appearance set to dark", "terminated " + appID} {
		if !strings.Contains(all, want) {
			t.Errorf("the device's log lacks %q:\n%s", want, all)
		}
	}
	if got := toolLog(t, a, holder, lease, "?lines=1"); len(got) != 1 || !strings.Contains(got[0], "terminated") {
		t.Errorf("the last line: %q", got)
	}
	if got := toolLog(t, a, holder, lease, "?process="+appID+"&since=10m"); len(got) != 1 || !strings.Contains(got[0], appID+" started") {
		t.Errorf("the app's own lines: %q", got)
	}

	// Bad input changes nothing and says what is wrong.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/launch", `{"appId":"com.example;reboot"}`},
		{"POST", "/open-url", `{"url":"no-scheme here"}`},
		{"PUT", "/location", `{"latitude":91,"longitude":0}`},
		{"PUT", "/appearance", `{"appearance":"sepia"}`},
		{"POST", "/launch", `{"appId":"` + appID + `","leaseId":"x"}`},
	} {
		if r := a.do(c.method, base+c.path, holder, c.body); r.status != 400 || r.errCode() != "BAD_REQUEST" {
			t.Errorf("%s %s %s: %d %s, want 400 BAD_REQUEST", c.method, c.path, c.body, r.status, r.raw)
		}
	}
	if r := a.do("GET", base+"/logs?lines=0", holder, ""); r.status != 400 {
		t.Errorf("logs?lines=0: %d %s", r.status, r.raw)
	}

	// Another agent: every route is an unknown lease, and nothing reaches
	// the device.
	before := len(toolLog(t, a, holder, lease, "?lines=5000"))
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/launch", `{"appId":"` + appID + `"}`},
		{"POST", "/terminate", `{"appId":"` + appID + `"}`},
		{"POST", "/open-url", `{"url":"evil://x"}`},
		{"PUT", "/location", `{"latitude":0,"longitude":0}`},
		{"PUT", "/appearance", `{"appearance":"light"}`},
		{"GET", "/logs", ``},
	} {
		if r := a.do(c.method, base+c.path, other, c.body); r.status != 404 || r.errCode() != "UNKNOWN_LEASE" {
			t.Errorf("another agent's %s %s: %d %s, want 404 UNKNOWN_LEASE", c.method, c.path, r.status, r.raw)
		}
	}
	if after := toolLog(t, a, holder, lease, "?lines=5000"); len(after) != before {
		t.Errorf("another agent's calls reached the device: its log went from %d to %d lines:\n%s", before, len(after), strings.Join(after[before:], "\n"))
	}
}

func TestDeviceToolRoutesOnTheDemoDriver(t *testing.T) {
	t.Parallel()
	h, a := httpHome(t)
	_, alice := h.token("agent", "alice")
	_, bob := h.token("agent", "bob")
	r := a.do("POST", "/v1/lease-requests", alice, `{"platform":"ios"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	lease := a.awaitState(alice, requestOf(t, r)["id"].(string), "granted")["lease"].(map[string]any)["id"].(string)
	exerciseTools(t, a, alice, bob, lease, "com.example.Todo", apptest.IPA("com.example.Todo", "Todo"))
}

// Through a gateway: each route reaches the lease's worker's device, and
// another agent is refused at the gateway.
func TestDeviceToolRoutesThroughAGateway(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.worker("tools-w1", 1)
	f.await("the worker connected", waitBound, connected(instanceID(t, w)))
	_, alice := f.gw.token("agent", "alice")
	_, bob := f.gw.token("agent", "bob")
	r := f.api.do("POST", "/v1/lease-requests", alice, `{"platform":"android"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	lease := f.api.awaitState(alice, requestOf(t, r)["id"].(string), "granted")["lease"].(map[string]any)["id"].(string)
	exerciseTools(t, f.api, alice, bob, lease, "com.example.notes", apptest.APK("com.example.notes"))
}

// The CLI's device tool commands on the demo driver: each acts on the
// caller's only lease and prints one JSON line when piped; a bad argument
// is a usage error before the daemon is asked; another agent naming the
// lease is refused and nothing reaches the device.
func TestDeviceToolCommandsOnTheDemoDriver(t *testing.T) {
	t.Parallel()
	h := newHome(t, fastDemo...)
	g := h.leaseDetached("tools-agent", "android")
	as := []string{"--agent-id", "tools-agent"}
	// The flags go before the arguments: location's coordinates and
	// launch's arguments after -- end the flags.
	run := func(args ...string) result { return h.run(append(append([]string{args[0]}, as...), args[1:]...)...) }
	expectFailure(t, run("launch", "com.example.notes"), 1, "APP_NOT_INSTALLED")
	jsonLine(t, run("install", localFile(t, "app.apk", apptest.APK("com.example.notes"))))
	for _, c := range []struct {
		args []string
		key  string
		want any
	}{
		{[]string{"launch", "com.example.notes"}, "appId", "com.example.notes"},
		{[]string{"open-url", "myapp://item/1?a=b;c"}, "url", "myapp://item/1?a=b;c"},
		{[]string{"location", "37.3349", "-122.009"}, "longitude", -122.009},
		{[]string{"location", "--", "-33.8568", "151.2153"}, "latitude", -33.8568},
		{[]string{"appearance", "dark"}, "appearance", "dark"},
		{[]string{"terminate", "com.example.notes"}, "appId", "com.example.notes"},
	} {
		if m := jsonLine(t, run(c.args...)); m[c.key] != c.want {
			t.Errorf("%v answered %v, want %s %v", c.args, m, c.key, c.want)
		}
	}
	m := jsonLine(t, run("logs", "--lines", "3"))
	lines, _ := m["lines"].([]any)
	if len(lines) != 3 || !strings.Contains(lines[2].(string), "terminated com.example.notes") || m["truncated"] != false {
		t.Errorf("logs --lines 3: %v", m)
	}
	m = jsonLine(t, run("logs", "--process", "com.example.notes", "--since", "10m"))
	if lines, _ := m["lines"].([]any); len(lines) != 1 {
		t.Errorf("logs --process com.example.notes: %v", m)
	}
	for _, args := range [][]string{
		{"launch", "com.example;reboot"},
		{"open-url", "not a url"},
		{"location", "91", "0"},
		{"location", "north", "0"},
		{"appearance", "sepia"},
		{"logs", "--lines", "0"},
		{"logs", "--since", "5"},
	} {
		expectFailure(t, run(args...), 2, "USAGE")
	}
	before := len(jsonLine(t, run("logs", "--lines", "5000"))["lines"].([]any))
	for _, args := range [][]string{
		{"launch", "com.example.notes"},
		{"open-url", "evil://x"},
		{"appearance", "light"},
		{"logs"},
	} {
		r := h.run(append([]string{args[0], "--agent-id", "someone-else", "--lease", g.Lease.ID}, args[1:]...)...)
		if e := cliError(t, r); r.code != 1 || (e["code"] != "UNKNOWN_LEASE" && e["code"] != "FORBIDDEN") {
			t.Errorf("another agent's %v: want UNKNOWN_LEASE or FORBIDDEN\n%s", args, r)
		}
	}
	if after := len(jsonLine(t, run("logs", "--lines", "5000"))["lines"].([]any)); after != before {
		t.Errorf("another agent's commands reached the device: its log went from %d to %d lines", before, after)
	}
}

// On the iOS stand-in, through the real binary: each command is one simctl
// call on the lease's simulator, scoped to simlock's device set.
func TestDeviceToolCommandsOnTheIOSStandIn(t *testing.T) {
	t.Parallel()
	e := shimtest.Build(t)
	h := newHome(t)
	h.withShims(e, "ios")
	g := h.leaseDetached("ios-tools", "ios")
	root, udid := h.path("devices/ios"), g.Device.DriverDeviceID
	run := func(args ...string) result {
		return h.run(append([]string{args[0], "--agent-id", "ios-tools"}, args[1:]...)...)
	}
	jsonLine(t, run("install", localFile(t, "Todo.ipa", apptest.IPA("com.example.Todo", "Todo"))))
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"launch", "com.example.Todo", "--", "-UITests", "a b"}, []string{"launch", udid, "com.example.Todo", "-UITests", "a b"}},
		{[]string{"open-url", "myapp://x?a=';id;'"}, []string{"openurl", udid, "myapp://x?a=';id;'"}},
		{[]string{"location", "37.3349", "-122.009"}, []string{"location", udid, "set", "37.3349,-122.009"}},
		{[]string{"appearance", "light"}, []string{"ui", udid, "appearance", "light"}},
		{[]string{"terminate", "com.example.Todo"}, []string{"terminate", udid, "com.example.Todo"}},
		{[]string{"logs", "--process", "Todo", "--since", "90s"}, []string{"spawn", udid, "log", "show", "--style", "compact", "--last", "2m", "--predicate", `process == "Todo"`}},
	} {
		from := len(e.Calls(t))
		jsonLine(t, run(c.args...))
		var got [][]string
		for _, call := range e.Calls(t)[from:] {
			if call.Tool == "xcrun" && len(call.Args) > 3 && call.Args[3] != "list" {
				got = append(got, call.Args)
			}
		}
		want := append([]string{"simctl", "--set", root}, c.want...)
		if len(got) != 1 || strings.Join(got[0], "\x00") != strings.Join(want, "\x00") {
			t.Errorf("%v ran %q, want one call %q", c.args, got, want)
		}
	}
	expectFailure(t, run("launch", "com.example.absent"), 1, "APP_NOT_INSTALLED")
}

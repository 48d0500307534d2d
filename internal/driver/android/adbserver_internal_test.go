package android

import (
	"os"
	"path/filepath"
	"testing"
)

// Only an adb server that an adb client started for the driver's port, run
// by this user from an adb executable, counts as one the driver may stop.
func TestForkedServerIdentity(t *testing.T) {
	sdkAdb := filepath.Join(t.TempDir(), "sdk-tool")
	if err := os.WriteFile(sdkAdb, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	const port, me = 5038, 501
	forked := []string{"adb", "-L", "tcp:5038", "fork-server", "server", "--reply-fd", "4"}
	for _, c := range []struct {
		name string
		p    procInfo
		want bool
	}{
		{"the SDK's adb, by its file", procInfo{exe: sdkAdb, uid: me, args: forked}, true},
		{"another adb", procInfo{exe: "/elsewhere/platform-tools/adb", uid: me, args: forked}, true},
		{"older adb with -P", procInfo{exe: "/elsewhere/platform-tools/adb", uid: me,
			args: []string{"adb", "-P", "5038", "fork-server", "server", "--reply-fd", "4"}}, true},
		{"localhost socket", procInfo{exe: "/elsewhere/platform-tools/adb", uid: me,
			args: []string{"/elsewhere/platform-tools/adb", "-L", "tcp:localhost:5038", "fork-server", "server"}}, true},
		{"another user's", procInfo{exe: sdkAdb, uid: me + 1, args: forked}, false},
		{"another port", procInfo{exe: sdkAdb, uid: me,
			args: []string{"adb", "-L", "tcp:5037", "fork-server", "server", "--reply-fd", "4"}}, false},
		{"a simlock's own server", procInfo{exe: sdkAdb, uid: me, args: []string{sdkAdb, "-P", "5038", "nodaemon", "server"}}, false},
		{"an adb client", procInfo{exe: sdkAdb, uid: me, args: []string{"adb", "-P", "5038", "devices"}}, false},
		{"not an adb executable", procInfo{exe: "/elsewhere/bin/python3", uid: me, args: forked}, false},
		{"not named adb", procInfo{exe: sdkAdb, uid: me,
			args: []string{"nc", "-L", "tcp:5038", "fork-server", "server"}}, false},
		{"no command line", procInfo{exe: sdkAdb, uid: me}, false},
	} {
		if got := forkedServer(c.p, port, sdkAdb, me); got != c.want {
			t.Errorf("%s: forkedServer(%+v) = %v, want %v", c.name, c.p, got, c.want)
		}
	}
}

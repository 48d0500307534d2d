package android

import (
	"os"
	"path/filepath"
	"testing"
)

// The user's AVD home comes from the daemon's environment as avdmanager
// reads it, unless the option names one.
func TestUserAVDHomeDefault(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory")
	}
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, c := range []struct {
		opt  string
		env  map[string]string
		want string
	}{
		{"/opt/avds", map[string]string{"ANDROID_AVD_HOME": "/a"}, "/opt/avds"},
		{"", map[string]string{"ANDROID_AVD_HOME": "/a", "ANDROID_USER_HOME": "/u"}, "/a"},
		{"", map[string]string{"ANDROID_USER_HOME": "/u"}, "/u/avd"},
		{"", map[string]string{}, filepath.Join(home, ".android", "avd")},
	} {
		if got := userAVDHomeOr(c.opt, env(c.env)); got != c.want {
			t.Errorf("userAVDHomeOr(%q, %v) = %q, want %q", c.opt, c.env, got, c.want)
		}
	}
}

// An image.sysdir entry names an image relative to the SDK or absolutely,
// with or without a trailing slash.
func TestNamesImage(t *testing.T) {
	im := installedImage{dir: "/sdk/system-images/android-35/google_apis/x86_64", rel: "system-images/android-35/google_apis/x86_64"}
	for v, want := range map[string]bool{
		"system-images/android-35/google_apis/x86_64/":       true,
		"system-images/android-35/google_apis/x86_64":        true,
		"/sdk/system-images/android-35/google_apis/x86_64/":  true,
		"system-images/android-35/google_apis/arm64-v8a/":    false,
		"/other/system-images/android-35/google_apis/x86_64": false,
		"": false,
	} {
		if got := namesImage(v, im); got != want {
			t.Errorf("namesImage(%q) = %v, want %v", v, got, want)
		}
	}
}

package contract

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppIDGrammars(t *testing.T) {
	for _, tc := range []struct {
		id          string
		bundle, pkg bool
	}{
		{"com.example.app", true, true},
		{"com.example.my-app", true, false},
		{"com.example.my_app", false, true},
		{"Todo", true, false},
		{"9lives.app", true, false},
		{"com.9lives", true, false},
		{"", false, false},
		{"-e.evil", false, false},
		{".com.example", false, false},
		{"com..example", true, false},
		{"com.example;reboot", false, false},
		{"com.example app", false, false},
		{"com.example/$(id)", false, false},
		{"com.example'x", false, false},
		{"com.example\n", false, false},
		{strings.Repeat("a.", 128) + "b", false, false},
	} {
		if got := CheckBundleID("appId", tc.id) == nil; got != tc.bundle {
			t.Errorf("CheckBundleID(%q) ok = %v, want %v", tc.id, got, tc.bundle)
		}
		if got := CheckPackageName("appId", tc.id) == nil; got != tc.pkg {
			t.Errorf("CheckPackageName(%q) ok = %v, want %v", tc.id, got, tc.pkg)
		}
		if got := CheckAppID("appId", tc.id) == nil; got != (tc.bundle || tc.pkg) {
			t.Errorf("CheckAppID(%q) ok = %v, want %v", tc.id, got, tc.bundle || tc.pkg)
		}
	}
}

func TestOpenURLChecks(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://example.com/a?b=c#d", true},
		{"myapp://item/1", true},
		{"mailto:a@example.com", true},
		{"x-callback-url:go", true},
		{"tel:+15555550100", true},
		{"", false},
		{"example.com", false},
		{"//example.com", false},
		{"1http://x", false},
		{"https://example.com/a b", false},
		{"https://example.com/\x00", false},
		{"https://example.com/\n", false},
		{"https://example.com/\u0085", false},
		{"https://example.com/\xff", false},
		{"https://example.com/" + strings.Repeat("a", MaxURLLen), false},
		{"https://example.com/';reboot;'", true}, // quoted by the driver for the device's shell
	} {
		if got := CheckOpenURL("url", tc.url) == nil; got != tc.ok {
			t.Errorf("CheckOpenURL(%q) ok = %v, want %v", tc.url, got, tc.ok)
		}
	}
}

func TestDeviceToolInputs(t *testing.T) {
	for _, tc := range []struct {
		in   Validator
		raw  string
		code Code
	}{
		{new(AppLaunchInput), `{"leaseId":"lse_1","appId":"com.example.app","args":["--flag","a b"]}`, ""},
		{new(AppLaunchInput), `{"leaseId":"lse_1"}`, CodeBadRequest},
		{new(AppLaunchInput), `{"leaseId":"lse_1","appId":"com.example.app","args":["a\u0000b"]}`, CodeBadRequest},
		{new(AppLaunchInput), `{"leaseId":"lse_1","appId":"com.example.app","args":[` + strings.Repeat(`"a",`, MaxLaunchArgs) + `"a"]}`, CodeBadRequest},
		{new(AppLaunchInput), `{"appId":"com.example.app"}`, CodeBadRequest},
		{new(AppLaunchInput), `{"leaseId":"lse_1","appId":"com.example.app","extra":1}`, CodeBadRequest},
		{new(AppTerminateInput), `{"leaseId":"lse_1","appId":"com.example.app"}`, ""},
		{new(OpenURLInput), `{"leaseId":"lse_1","url":"myapp://x"}`, ""},
		{new(OpenURLInput), `{"leaseId":"lse_1","url":"no scheme"}`, CodeBadRequest},
		{new(DeviceLogsInput), `{"leaseId":"lse_1"}`, ""},
		{new(DeviceLogsInput), `{"leaseId":"lse_1","lines":5000,"sinceMs":86400000,"process":"com.example.app"}`, ""},
		{new(DeviceLogsInput), `{"leaseId":"lse_1","lines":5001}`, CodeBadRequest},
		{new(DeviceLogsInput), `{"leaseId":"lse_1","lines":-1}`, CodeBadRequest},
		{new(DeviceLogsInput), `{"leaseId":"lse_1","sinceMs":86400001}`, CodeBadRequest},
		{new(DeviceLogsInput), `{"leaseId":"lse_1","process":"a*:S"}`, CodeBadRequest},
		{new(LocationInput), `{"leaseId":"lse_1","latitude":0,"longitude":0}`, ""},
		{new(LocationInput), `{"leaseId":"lse_1","latitude":-90,"longitude":180}`, ""},
		{new(LocationInput), `{"leaseId":"lse_1","latitude":90.01,"longitude":0}`, CodeBadRequest},
		{new(LocationInput), `{"leaseId":"lse_1","latitude":0,"longitude":-180.5}`, CodeBadRequest},
		{new(LocationInput), `{"leaseId":"lse_1","latitude":1}`, CodeBadRequest},
		{new(AppearanceInput), `{"leaseId":"lse_1","appearance":"dark"}`, ""},
		{new(AppearanceInput), `{"leaseId":"lse_1","appearance":"sepia"}`, CodeBadRequest},
	} {
		err := DecodeInput([]byte(tc.raw), tc.in)
		if tc.code == "" && err != nil {
			t.Errorf("%T %s: %v", tc.in, tc.raw, err)
		}
		if tc.code != "" && AsError(err).Code != tc.code {
			t.Errorf("%T %s: got %v, want %s", tc.in, tc.raw, err, tc.code)
		}
	}
}

func TestBoundLogLines(t *testing.T) {
	got := BoundLogLines([]string{"a", "b", "c"}, 2)
	if strings.Join(got.Lines, ",") != "b,c" || got.Truncated {
		t.Errorf("the last 2 of 3: %+v", got)
	}
	big := strings.Repeat("x", MaxLogBytes/2)
	got = BoundLogLines([]string{"old", big, big}, 10)
	if len(got.Lines) != 1 || !got.Truncated {
		t.Errorf("two lines of half the bound with their newlines: kept %d, truncated %v", len(got.Lines), got.Truncated)
	}
	if got := BoundLogLines(nil, 10); got.Lines == nil || len(got.Lines) != 0 {
		t.Errorf("no lines answer an empty list, not null: %#v", got.Lines)
	}
}

// FuzzDeviceToolChecks: whatever an app id or URL check takes is safe to
// hand a platform tool as one argument: an app id is only letters,
// digits, '.', '-' and '_' and never starts like an option; a URL holds no
// control character or white space and has its scheme.
func FuzzDeviceToolChecks(f *testing.F) {
	for _, s := range []string{"com.example.app", "-rf", "a.b;c", "https://x/y", "myapp:x y", "\x00", "a.b\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckAppID("appId", s) == nil {
			if s == "" || len(s) > MaxAppIDLen || s[0] == '-' || s[0] == '.' {
				t.Fatalf("app id %q taken", s)
			}
			for _, r := range s {
				if !(r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
					t.Fatalf("app id %q taken with %q", s, r)
				}
			}
		}
		if CheckOpenURL("url", s) == nil {
			if !utf8.ValidString(s) || len(s) > MaxURLLen || !strings.Contains(s, ":") {
				t.Fatalf("url %q taken", s)
			}
			for _, r := range s {
				if r <= 0x20 || r == 0x7f {
					t.Fatalf("url %q taken with %q", s, r)
				}
			}
		}
		if CheckLogFilter("process", s) == nil && strings.ContainsAny(s, "*: '\"\\$;|&") {
			t.Fatalf("filter %q taken", s)
		}
	})
}

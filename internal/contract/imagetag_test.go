package contract

import (
	"errors"
	"strings"
	"testing"
)

func TestImageTagIsCheckedAndAndroidOnly(t *testing.T) {
	for _, c := range []struct {
		name     string
		platform Platform
		tag      string
		msg      string // "" when valid
	}{
		{"none on ios", PlatformIOS, "", ""},
		{"none on android", PlatformAndroid, "", ""},
		{"google_apis", PlatformAndroid, "google_apis", ""},
		{"playstore", PlatformAndroid, "google_apis_playstore", ""},
		{"dashes", PlatformAndroid, "android-wear", ""},
		{"one char", PlatformAndroid, "x", ""},
		{"64 chars", PlatformAndroid, strings.Repeat("a", MaxImageTagLen), ""},
		{"65 chars", PlatformAndroid, strings.Repeat("a", MaxImageTagLen+1), "at most 64"},
		{"a space", PlatformAndroid, "google apis", "letters, digits"},
		{"a semicolon", PlatformAndroid, "google_apis;x86_64", "letters, digits"},
		{"a slash", PlatformAndroid, "../google_apis", "letters, digits"},
		{"a dot", PlatformAndroid, "google.apis", "letters, digits"},
		{"non-ASCII", PlatformAndroid, "göogle", "letters, digits"},
		{"on ios", PlatformIOS, "google_apis", "android only"},
	} {
		in := LeaseRequestInput{Platform: c.platform, ImageTag: c.tag}
		err := in.Validate()
		if c.msg == "" {
			if err != nil {
				t.Errorf("%s: Validate = %v, want nil", c.name, err)
			}
			continue
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != CodeBadRequest || ce.Details["field"] != "imageTag" || !strings.Contains(ce.Message, c.msg) {
			t.Errorf("%s: Validate = %v, want BAD_REQUEST on imageTag saying %q", c.name, err, c.msg)
		}
	}
}

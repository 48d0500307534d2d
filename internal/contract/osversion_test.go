package contract

import "testing"

func TestOSVersionSpecs(t *testing.T) {
	cases := []struct {
		spec string
		yes  []string
		no   []string
	}{
		{"", []string{"18.6", "26.1"}, nil},
		{"18", []string{"18", "18.6", "18.6.1"}, []string{"180", "17.5", "26.1"}},
		{"18.4", []string{"18.4", "18.4.1"}, []string{"18.40", "18.5"}},
		{">=18 <26", []string{"18", "18.6", "25.9"}, []string{"17.5", "26", "26.1"}},
		{"18 - 26", []string{"18.0", "26", "26.1"}, []string{"17.5", "27.0"}},
		{">17 <=18", []string{"18", "18.6"}, []string{"17.5", "19"}},
		{"Baklava", []string{"Baklava"}, []string{"35"}},
		{"34-ext12", []string{"34-ext12"}, []string{"34"}},
	}
	for _, c := range cases {
		s, err := ParseOSVersion(c.spec)
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		for _, v := range c.yes {
			if !s.Matches(v) {
				t.Errorf("%q should take %s", c.spec, v)
			}
		}
		for _, v := range c.no {
			if s.Matches(v) {
				t.Errorf("%q should not take %s", c.spec, v)
			}
		}
	}
	for _, bad := range []string{"^18", "~18.4", "18.x", "*", "18 || 26", ">=26 <18", ">=abc", "18 - x", "garbage", "18.", "v18", "18 19", "26.1 beta"} {
		if _, err := ParseOSVersion(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if s, _ := ParseOSVersion(">=18 <26"); !s.IsRange() {
		t.Error("a comparison is a range")
	}
	if s, _ := ParseOSVersion("18"); s.IsRange() {
		t.Error("a short version is not a range: it may download")
	}
}

// A version that names no runtime any platform could have is BAD_REQUEST
// before a request is made, not a runtime looked for (RUNTIME_MISSING); an
// iOS request takes numbers only, an Android one also a level's extension
// or a preview's code name.
func TestAMalformedOSVersionIsABadRequest(t *testing.T) {
	for _, c := range []struct {
		platform Platform
		os       string
		ok       bool
	}{
		{PlatformIOS, "garbage", false},
		{PlatformAndroid, "garbage", false},
		{PlatformIOS, "Baklava", false},
		{PlatformIOS, "34-ext12", false},
		{PlatformIOS, "26.4", true},
		{PlatformIOS, ">=18 <27", true},
		{PlatformAndroid, "Baklava", true},
		{PlatformAndroid, "34-ext12", true},
		{PlatformAndroid, "36", true},
	} {
		in := LeaseRequestInput{Platform: c.platform, OSVersion: c.os}
		err := in.Validate()
		if c.ok {
			if err != nil {
				t.Errorf("%s --os %s: %v, want it taken", c.platform, c.os, err)
			}
			continue
		}
		ce, _ := err.(*Error)
		if ce == nil || ce.Code != CodeBadRequest || ce.Details["field"] != "osVersion" {
			t.Errorf("%s --os %s: %v, want BAD_REQUEST naming osVersion", c.platform, c.os, err)
		}
	}
}

// A TTL past the protocol's ceiling is told the ceiling, not that it "must
// be a positive number"; a negative one is told it is negative.
func TestATTLOutOfTheProtocolBoundSaysTheBound(t *testing.T) {
	for _, c := range []struct {
		ms   int64
		want string
	}{
		{1 << 31, "ttlMs: must be at most 604800000 milliseconds (7 days, the protocol's ceiling; lease.maxTtlMs may set less), got 2147483648"},
		{-1, "ttlMs: must not be negative (0 or none is the default), got -1"},
	} {
		for _, in := range []interface{ Validate() error }{
			&LeaseRequestInput{Platform: PlatformIOS, TTLMs: c.ms},
			&LeaseRenewInput{LeaseID: "lse_1", TTLMs: c.ms},
		} {
			err, _ := in.Validate().(*Error)
			if err == nil || err.Code != CodeBadRequest || err.Message != c.want {
				t.Errorf("%T ttlMs %d: %v, want %q", in, c.ms, err, c.want)
			}
		}
	}
}

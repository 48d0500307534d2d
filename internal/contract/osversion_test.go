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
	for _, bad := range []string{"^18", "~18.4", "18.x", "*", "18 || 26", ">=26 <18", ">=abc", "18 - x"} {
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

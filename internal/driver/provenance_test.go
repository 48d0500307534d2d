package driver

import (
	"errors"
	"testing"
)

func TestDriftClassification(t *testing.T) {
	const tok, other = "aaaa", "bbbb"
	for _, c := range []struct {
		name string
		p    Provenance
		want Drift
	}{
		{"intact", Provenance{Token: tok, Durable: tok, Erasable: tok, ErasableReadable: true}, DriftNone},
		{"intact, erasable unreadable", Provenance{Token: tok, Durable: tok, ErasableReadable: false}, DriftNone},
		{"erased", Provenance{Token: tok, Durable: tok, ErasableReadable: true}, DriftErased},
		{"durable rewritten", Provenance{Token: tok, Durable: other, Erasable: other, ErasableReadable: true}, DriftMarkMismatch},
		{"durable rewritten, erasable unreadable", Provenance{Token: tok, Durable: other}, DriftMarkMismatch},
		{"erasable rewritten", Provenance{Token: tok, Durable: tok, Erasable: other, ErasableReadable: true}, DriftMarkMismatch},
		{"durable gone", Provenance{Token: tok, Erasable: tok, ErasableReadable: true}, DriftDurableMissing},
		{"durable gone, even unreadable", Provenance{Token: tok}, DriftDurableMissing},
		{"durable gone ranks before erased", Provenance{Token: tok, ErasableReadable: true}, DriftDurableMissing},
		// A device made before marks: nothing recorded.
		{"legacy, unmarked", Provenance{ErasableReadable: true}, DriftNone},
		{"legacy, marked by a clean", Provenance{Durable: tok, Erasable: tok, ErasableReadable: true}, DriftNone},
		{"legacy, erased since", Provenance{Durable: tok, ErasableReadable: true}, DriftErased},
		{"legacy, marks disagree", Provenance{Durable: tok, Erasable: other, ErasableReadable: true}, DriftMarkMismatch},
		{"legacy, durable gone", Provenance{Erasable: tok, ErasableReadable: true}, DriftDurableMissing},
	} {
		if got := c.p.Drift(); got != c.want {
			t.Errorf("%s: %+v.Drift() = %q, want %q", c.name, c.p, got, c.want)
		}
	}
}

func TestCheckDurable(t *testing.T) {
	const tok = "aaaa"
	for _, c := range []struct {
		token, durable string
		want           Drift // "" for no refusal
	}{
		{tok, tok, ""},
		{"", "", ""}, // made before marks: nothing to check against
		{"", "whatever", ""},
		{tok, "", DriftDurableMissing},
		{tok, "bbbb", DriftMarkMismatch},
	} {
		err := CheckDurable("dev", c.token, c.durable)
		var pe *ProvenanceError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckDurable(%q, %q) = %v, want nil", c.token, c.durable, err)
		case c.want != "" && (!errors.As(err, &pe) || pe.Drift != c.want || pe.DeviceID != "dev"):
			t.Errorf("CheckDurable(%q, %q) = %v, want a refusal for %s", c.token, c.durable, err, c.want)
		}
	}
	if a, b := NewMarkToken(), NewMarkToken(); a == b || len(a) != 32 {
		t.Errorf("NewMarkToken = %q, %q: want two different 32-digit tokens", a, b)
	}
}

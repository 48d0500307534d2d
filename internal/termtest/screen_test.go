package termtest

import (
	"slices"
	"testing"
)

func TestALineRedrawnInPlaceLeavesOnlyItsLastVersion(t *testing.T) {
	s := &Screen{Width: 20}
	s.Write([]byte("\r\x1b[2Kwaiting 1s\r\x1b[2Kwaiting 2s\r\x1b[2Kdone\nnext"))
	if got, want := s.Lines(), []string{"done", "next"}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}

func TestALineLongerThanTheWidthWrapsAndItsRedrawsPileUp(t *testing.T) {
	s := &Screen{Width: 10}
	s.Write([]byte("0123456789AB\r\x1b[2K0123456789AB"))
	if got, want := s.Lines(), []string{"0123456789", "0123456789", "AB"}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}

func TestFillingTheLastColumnWrapsOnlyAtTheNextGlyph(t *testing.T) {
	s := &Screen{Width: 5}
	s.Write([]byte("abcde\r\x1b[2Kvwxyz\n"))
	if got, want := s.Lines(), []string{"vwxyz"}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}

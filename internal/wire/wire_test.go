package wire

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReaderSkipsOversizedFrameAndContinues(t *testing.T) {
	big := strings.Repeat("x", 300)
	r := NewReader(strings.NewReader("{\"a\":1}\n"+big+"\n\n{\"b\":2}\n{\"c\":3}"), 100)
	want := []string{`{"a":1}`, "", `{"b":2}`, `{"c":3}`}
	for i, w := range want {
		got, err := r.Next()
		if w == "" {
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("frame %d: err = %v, want ErrFrameTooLarge", i, err)
			}
			continue
		}
		if err != nil || string(got) != w {
			t.Fatalf("frame %d: got %q, %v; want %q", i, got, err, w)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after last frame: err = %v, want EOF", err)
	}
}

func TestReaderHandlesFramesLongerThanItsBuffer(t *testing.T) {
	long := `{"s":"` + strings.Repeat("y", 200<<10) + `"}`
	r := NewReader(strings.NewReader(long+"\n"), 1<<20)
	got, err := r.Next()
	if err != nil || string(got) != long {
		t.Fatalf("got %d bytes, %v; want %d bytes", len(got), err, len(long))
	}
}

func TestFrameAtExactLimitIsAccepted(t *testing.T) {
	frame := strings.Repeat("z", 100)
	r := NewReader(strings.NewReader(frame+"\n"+frame+"z\n"), 100)
	if got, err := r.Next(); err != nil || string(got) != frame {
		t.Fatalf("frame at the limit: %q, %v", got, err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("frame one over the limit: err = %v", err)
	}
}

func TestAFrameStaysWhatItWasAfterTheNextIsRead(t *testing.T) {
	r := NewReader(strings.NewReader("{\"a\":1}\n{\"b\":2}\n"), 100)
	first, _ := r.Next()
	second, _ := r.Next()
	if string(first) != `{"a":1}` || string(second) != `{"b":2}` {
		t.Fatalf("frames %q %q: the first was overwritten by reading the second", first, second)
	}
}

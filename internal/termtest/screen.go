// Package termtest holds what tests of terminal views share: a golden-file
// comparison (Golden), and a replay of what a program wrote to a terminal
// that returns the lines a person would see in the scrollback afterwards
// (Screen). The replay models what simlock's live lines use and nothing
// more: printable text, carriage return, newline, erase-in-line (ESC [ K,
// ESC [ 2K) and the automatic wrap of a terminal of fixed width, with the
// wrap deferred until the next glyph as real terminals do. Other escape
// sequences are skipped.
package termtest

import (
	"strings"
	"unicode/utf8"
)

// Screen is a terminal of Width columns with an unbounded scrollback.
type Screen struct {
	Width int

	lines []string // finished lines
	cur   []rune   // the line the cursor is on
	col   int
	wrap  bool // the last column was written: the next glyph wraps
	esc   []byte
}

// Write takes output as the terminal would.
func (s *Screen) Write(p []byte) (int, error) {
	for len(p) > 0 {
		if s.esc != nil {
			s.esc = append(s.esc, p[0])
			p = p[1:]
			s.escape()
			continue
		}
		r, n := utf8.DecodeRune(p)
		p = p[n:]
		switch r {
		case 0x1b:
			s.esc = []byte{0x1b}
		case '\r':
			s.col, s.wrap = 0, false
		case '\n':
			s.newline()
		default:
			if r < 0x20 {
				continue
			}
			s.put(r)
		}
	}
	return len(p), nil
}

func (s *Screen) put(r rune) {
	if s.wrap {
		s.newline()
	}
	for len(s.cur) <= s.col {
		s.cur = append(s.cur, ' ')
	}
	s.cur[s.col] = r
	if s.col == s.Width-1 {
		s.wrap = true
		return
	}
	s.col++
}

func (s *Screen) newline() {
	s.lines = append(s.lines, strings.TrimRight(string(s.cur), " "))
	s.cur, s.col, s.wrap = nil, 0, false
}

// escape acts on a complete CSI sequence and drops any other.
func (s *Screen) escape() {
	b := s.esc
	if len(b) == 2 && b[1] != '[' {
		s.esc = nil // a two-byte escape: ignored
		return
	}
	last := b[len(b)-1]
	if len(b) < 3 || last < 0x40 || last > 0x7e {
		return // not complete yet
	}
	s.esc = nil
	if last != 'K' {
		return
	}
	switch string(b[2 : len(b)-1]) {
	case "2":
		s.cur = nil
	case "", "0":
		if s.col < len(s.cur) {
			s.cur = s.cur[:s.col]
		}
	}
}

// Lines is the scrollback as it stands, the cursor's line last when it
// holds anything.
func (s *Screen) Lines() []string {
	out := append([]string(nil), s.lines...)
	if line := strings.TrimRight(string(s.cur), " "); line != "" {
		out = append(out, line)
	}
	return out
}

package apiclient

import (
	"bufio"
	"io"
	"strings"
)

// sseEvent is one event of a text/event-stream.
type sseEvent struct {
	id, name string
	data     string
}

// maxSSELine bounds one line of a stream (an event's data is one line).
const maxSSELine = 4 << 20

// sseReader reads the events of a stream, skipping comments.
type sseReader struct {
	sc *bufio.Scanner
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxSSELine)
	return &sseReader{sc: sc}
}

// next returns the next event; io.EOF when the stream ended cleanly
// between events, io.ErrUnexpectedEOF when it ended within one.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data []string
	started := false
	for s.sc.Scan() {
		line := s.sc.Text()
		if line == "" {
			if !started {
				continue
			}
			ev.data = strings.Join(data, "\n")
			if ev.name == "" {
				ev.name = "message"
			}
			return ev, nil
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		started = true
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.id = value
		case "event":
			ev.name = value
		case "data":
			data = append(data, value)
		}
	}
	if err := s.sc.Err(); err != nil {
		return ev, err
	}
	if started {
		return ev, io.ErrUnexpectedEOF
	}
	return ev, io.EOF
}

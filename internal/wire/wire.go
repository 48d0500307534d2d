// Package wire frames the daemon protocol: one JSON object per line, each at
// most a fixed size. It knows nothing of the transport (the unix socket, or
// a worker's uplink, which carries one frame per WebSocket message) or of
// the operations; the daemon and the typed client use it over either.
//
// A Reader is for one goroutine; a Writer may be shared by many.
package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// ErrFrameTooLarge is returned for a line longer than the limit. The rest of
// the line has been discarded, so the next call reads the next frame.
var ErrFrameTooLarge = errors.New("frame too large")

// Reader reads newline-delimited frames.
type Reader struct {
	br  *bufio.Reader
	max int
}

// NewReader reads frames of at most max bytes (the newline excluded).
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next non-empty frame, in a slice of its own that the
// caller may keep. At the end of input it returns io.EOF (a last line
// without a newline is still a frame).
func (r *Reader) Next() ([]byte, error) {
	var buf []byte
	tooLarge := false
	for {
		chunk, err := r.br.ReadSlice('\n')
		if !tooLarge {
			if len(buf)+len(chunk) > r.max+1 {
				tooLarge = true
				buf = nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && !errors.Is(err, io.EOF):
			return nil, err
		}
		if tooLarge {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, ErrFrameTooLarge
		}
		line := bytes.TrimSpace(buf)
		if len(line) > r.max {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, ErrFrameTooLarge
		}
		if len(line) > 0 {
			return line, nil
		}
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		buf = buf[:0]
	}
}

// Writer writes frames; concurrent writes never interleave.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter writes frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write encodes v as one line.
func (w *Writer) Write(v any) error {
	b, err := Encode(v)
	if err != nil {
		return err
	}
	return w.WriteRaw(b)
}

// WriteRaw writes an already-encoded frame, which must end in a newline.
func (w *Writer) WriteRaw(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.w.Write(b)
	return err
}

// Encode makes one frame of v, newline included.
func Encode(v any) ([]byte, error) {
	// Not HTML-escaped, as json.Marshal would: a frame is no HTML, and an
	// id a client sent (a raw JSON value the daemon echoes) then comes
	// back byte for byte, "&" as "&" rather than "\u0026".
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

package usage

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/simlock/simlock/internal/contract"
)

// A Delta is what one event adds to one cell of the rollup.
type Delta struct {
	// Requests is +1 for a request, and -1 for a gateway's request when it
	// is handed to a worker (in the cell the request was counted in).
	Requests int
	// Granted is the source of a grant; "" when the event is not one.
	Granted string
	// Rejected is the reason of a refusal counted under Rejected; a
	// refusal that is a cancellation or a timeout sets Cancelled or
	// TimedOut instead.
	Rejected            string
	Cancelled, TimedOut bool
	// Wait, Hold and Turnaround are durations in ms, each measured when
	// Has says so. ToDevice marks a wait that is a time to device.
	Wait, Hold, Turnaround int64
	Has                    Has
}

// Has says which durations a Delta measured.
type Has uint8

const (
	HasWait Has = 1 << iota
	HasToDevice
	HasHold
	HasTurnaround
)

// The record's flags, the first varint of an encoded Delta; the fields
// follow in the order of the flags.
const (
	fRequests = 1 << iota
	fGranted
	fRejected
	fCancelled
	fTimedOut
	fWait
	fToDevice
	fHold
	fTurnaround
)

// sources are the grant sources a record names by a small number; any
// other is spelled out after code 0.
var sources = [...]string{1: string(contract.SourceWarm), 2: string(contract.SourceBooted), 3: string(contract.SourceProvisioned)}

func sourceCode(s string) int {
	for i, n := range sources {
		if i > 0 && n == s {
			return i
		}
	}
	return 0
}

// AppendDelta appends d's encoding to b: a varint of flags, then the
// fields d has, as varints and length-prefixed strings. A cell's records
// are these encodings one after another.
func AppendDelta(b []byte, d Delta) []byte {
	var f uint64
	if d.Requests != 0 {
		f |= fRequests
	}
	if d.Granted != "" {
		f |= fGranted
	}
	if d.Rejected != "" {
		f |= fRejected
	}
	if d.Cancelled {
		f |= fCancelled
	}
	if d.TimedOut {
		f |= fTimedOut
	}
	if d.Has&HasWait != 0 {
		f |= fWait
		if d.Has&HasToDevice != 0 {
			f |= fToDevice
		}
	}
	if d.Has&HasHold != 0 {
		f |= fHold
	}
	if d.Has&HasTurnaround != 0 {
		f |= fTurnaround
	}
	b = binary.AppendUvarint(b, f)
	if f&fRequests != 0 {
		b = binary.AppendVarint(b, int64(d.Requests))
	}
	if f&fGranted != 0 {
		c := sourceCode(d.Granted)
		b = binary.AppendUvarint(b, uint64(c))
		if c == 0 {
			b = appendString(b, d.Granted)
		}
	}
	if f&fRejected != 0 {
		b = appendString(b, d.Rejected)
	}
	if f&fWait != 0 {
		b = binary.AppendVarint(b, d.Wait)
	}
	if f&fHold != 0 {
		b = binary.AppendVarint(b, d.Hold)
	}
	if f&fTurnaround != 0 {
		b = binary.AppendVarint(b, d.Turnaround)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// record is a decoded Delta as the query reads it: the strings are views
// of the encoding, not copies.
type record struct {
	flags                  uint64
	requests               int64
	source                 int // a code of sources; 0 with sourceName
	sourceName, reason     []byte
	wait, hold, turnaround int64
}

var errCorrupt = errors.New("usage: a rollup record is cut short or malformed")

// nextRecord decodes the first record of b and returns the rest.
func nextRecord(b []byte) (record, []byte, error) {
	var r record
	var ok bool
	if r.flags, b, ok = uvarint(b); !ok || r.flags >= fTurnaround<<1 {
		return r, nil, errCorrupt
	}
	if r.flags&fRequests != 0 {
		if r.requests, b, ok = varint(b); !ok {
			return r, nil, errCorrupt
		}
	}
	if r.flags&fGranted != 0 {
		var c uint64
		if c, b, ok = uvarint(b); !ok || c >= uint64(len(sources)) {
			return r, nil, errCorrupt
		}
		r.source = int(c)
		if c == 0 {
			if r.sourceName, b, ok = bytesField(b); !ok {
				return r, nil, errCorrupt
			}
		}
	}
	if r.flags&fRejected != 0 {
		if r.reason, b, ok = bytesField(b); !ok {
			return r, nil, errCorrupt
		}
	}
	b, ok = optVarint(b, true, r.flags&fWait != 0, &r.wait)
	b, ok = optVarint(b, ok, r.flags&fHold != 0, &r.hold)
	b, ok = optVarint(b, ok, r.flags&fTurnaround != 0, &r.turnaround)
	if !ok {
		return r, nil, errCorrupt
	}
	return r, b, nil
}

// optVarint reads a varint into *to when the field is present and the
// fields before it read well (ok), and passes a failure on.
func optVarint(b []byte, ok, present bool, to *int64) ([]byte, bool) {
	if !ok || !present {
		return b, ok
	}
	v, rest, ok := varint(b)
	*to = v
	return rest, ok
}

// delta is the Delta r encodes.
func (r record) delta() Delta {
	d := Delta{Requests: int(r.requests), Rejected: string(r.reason),
		Cancelled: r.flags&fCancelled != 0, TimedOut: r.flags&fTimedOut != 0,
		Wait: r.wait, Hold: r.hold, Turnaround: r.turnaround}
	if r.flags&fGranted != 0 {
		d.Granted = sources[r.source]
		if r.source == 0 {
			d.Granted = string(r.sourceName)
		}
	}
	for _, f := range []struct {
		flag uint64
		has  Has
	}{{fWait, HasWait}, {fToDevice, HasToDevice}, {fHold, HasHold}, {fTurnaround, HasTurnaround}} {
		if r.flags&f.flag != 0 {
			d.Has |= f.has
		}
	}
	return d
}

// Deltas decodes a cell's records.
func Deltas(records []byte) ([]Delta, error) {
	var out []Delta
	for len(records) > 0 {
		r, rest, err := nextRecord(records)
		if err != nil {
			return nil, err
		}
		out = append(out, r.delta())
		records = rest
	}
	return out, nil
}

// AppendChunk appends to b the records of the cell at minute, for a row
// that gathers the cells of the hour starting at hour: the minute's
// offset in the hour, the records' length, the records. A minute may have
// several chunks in one row (events that reached the rollup after its hour
// was gathered, relayed late by a worker).
func AppendChunk(b []byte, hour, minute int64, records []byte) []byte {
	b = binary.AppendUvarint(b, uint64((minute-hour)/contract.UsageMinuteMs))
	b = binary.AppendUvarint(b, uint64(len(records)))
	return append(b, records...)
}

// HourMs is the span of a row of gathered cells.
const HourMs = 60 * contract.UsageMinuteMs

// Hour is the start of the hour ms falls in.
func Hour(ms int64) int64 {
	m := ms % HourMs
	if m < 0 {
		m += HourMs
	}
	return ms - m
}

// nextChunk decodes the first chunk of an hour row and returns the rest.
func nextChunk(b []byte, hour int64) (minute int64, records, rest []byte, err error) {
	off, b, ok := uvarint(b)
	if !ok || off >= 60 {
		return 0, nil, nil, fmt.Errorf("usage: a rollup chunk of the hour at %d is malformed", hour)
	}
	records, b, ok = bytesField(b)
	if !ok {
		return 0, nil, nil, fmt.Errorf("usage: a rollup chunk of the hour at %d is cut short", hour)
	}
	return hour + int64(off)*contract.UsageMinuteMs, records, b, nil
}

func uvarint(b []byte) (uint64, []byte, bool) {
	if len(b) > 0 && b[0] < 0x80 { // most fields are one byte
		return uint64(b[0]), b[1:], true
	}
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

func varint(b []byte) (int64, []byte, bool) {
	u, b, ok := uvarint(b)
	v := int64(u >> 1) // zigzag, as binary.AppendVarint writes it
	if u&1 != 0 {
		v = ^v
	}
	return v, b, ok
}

func bytesField(b []byte) ([]byte, []byte, bool) {
	n, b, ok := uvarint(b)
	if !ok || n > uint64(len(b)) {
		return nil, nil, false
	}
	return b[:n], b[n:], true
}

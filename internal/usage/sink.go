package usage

// Sink takes a window's rollup rows as a store reads them: the cells of one
// minute (AppendDelta's records) and the gathered rows of one hour
// (AppendChunk's chunks). A Query is one. The bytes it is given are valid
// only during the call.
type Sink interface {
	AddMinute(minute int64, worker, platform string, records []byte) error
	AddHour(hour int64, worker, platform string, chunks []byte) error
}

var _ Sink = (*Query)(nil)

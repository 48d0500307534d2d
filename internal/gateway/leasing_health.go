package gateway

// Err is the commit failure that stopped the fleet queue, or nil. It takes
// the queue's decision lock, so a liveness probe also learns that the
// queue still decides.
func (l *Leasing) Err() error { return l.q.Err() }

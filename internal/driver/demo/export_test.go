package demo

import "encoding/json"

// World is the whole world d would write to its snapshot, generation aside,
// so that tests can compare the worlds of two drivers exactly: devices with
// their states, ports and pending faults, runtimes and receipts, the install
// count.
func World(d *Driver) string {
	d.mu.Lock()
	w := d.snapshotLocked()
	d.mu.Unlock()
	b, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b)
}

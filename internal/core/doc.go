// Package core holds simlock's domain rules as plain Go with no I/O: the
// device state machine, capacity limits and what counts against them, and
// which device or model fits a request. The leasing engine calls it while it
// holds its decision lock; nothing here blocks, and every function is safe to
// call concurrently on values it is given.
package core

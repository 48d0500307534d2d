package client

import (
	"errors"
	"syscall"
)

// NotListening reports whether a Dial failed because no daemon listens on
// the socket yet (none there, or nobody accepting), as opposed to one that
// answered and refused.
func NotListening(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

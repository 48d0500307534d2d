// Package ids mints the random ids simlock gives its records and names: a
// kind's prefix ("lse_", "req_", "evt_", "tok_", "job_", "ins_", "tr_",
// "simlock_" for an AVD, ...) and random bytes in lower-case hex. Every such
// id is minted here, so they all draw from the same source (crypto/rand) in
// the same shape. The UUIDs an iOS simulator is named by, and the secrets
// of tokens and the socket, are not ids and are made where they are used.
package ids

import (
	"crypto/rand"
	"encoding/hex"
)

// Sizes of the random part, in bytes (twice as many hex digits).
const (
	// Short is a record's id: a device, lease, request, event or token
	// (16 hex digits).
	Short = 8
	// Long is an id that is also a capability, such as a transfer's
	// (32 hex digits).
	Long = 16
)

// New is prefix followed by n random bytes in hex.
func New(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return prefix + hex.EncodeToString(b)
}

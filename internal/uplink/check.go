package uplink

import (
	"unicode"
	"unicode/utf8"

	"github.com/simlock/simlock/internal/contract"
)

// maxHeaderLen is the longest label, in characters: as long as the
// longest worker id.
const maxHeaderLen = contract.MaxWorkerIDLen

// CheckWorkerID checks a worker's instance id as its HeaderWorkerID names
// it, by the contract's one rule for worker ids (contract.CheckWorkerID).
func CheckWorkerID(id string) error { return contract.CheckWorkerID(HeaderWorkerID, id) }

// CheckLabel checks a worker's label as its HeaderWorkerLabel names it, what
// people see of the worker: 1 to 64 printable characters of UTF-8, which
// leaves out control and formatting characters (a right-to-left override
// would make one label read as another). Nor may it start or end with a
// space, which an HTTP header does not carry.
func CheckLabel(label string) error {
	if label == "" {
		return contract.BadRequest(HeaderWorkerLabel, "is required")
	}
	if !utf8.ValidString(label) {
		return contract.BadRequest(HeaderWorkerLabel, "must be UTF-8")
	}
	if n := utf8.RuneCountInString(label); n > maxHeaderLen {
		return contract.BadRequest(HeaderWorkerLabel, "must be at most %d characters, got %d", maxHeaderLen, n)
	}
	for i, r := range label {
		if !unicode.IsPrint(r) {
			return contract.BadRequest(HeaderWorkerLabel, "must be printable, got %U at byte %d", r, i)
		}
	}
	if label[0] == ' ' || label[len(label)-1] == ' ' {
		return contract.BadRequest(HeaderWorkerLabel, "must not start or end with a space")
	}
	return nil
}

package contract

import (
	"encoding/json"
)

// Event is the envelope of one fact, minted once where it happened.
type Event struct {
	ID        string          `json:"id"`
	Seq       int64           `json:"seq"`
	Timestamp int64           `json:"timestamp"`
	Event     string          `json:"event"`
	Payload   json.RawMessage `json:"payload"`
}

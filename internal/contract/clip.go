package contract

// ClipLen is how much of a refused value an error message quotes back.
const ClipLen = 64

// Clip shortens a value quoted back in a message to ClipLen bytes, marked
// with "…" when cut, so a huge input never makes a huge message.
func Clip(s string) string { return ClipTo(s, ClipLen) }

// ClipTo is Clip with its own bound of n bytes, for a message that quotes
// less (or more) than ClipLen.
func ClipTo(s string, n int) string {
	if len(s) > n {
		// Cut on a character boundary: a message never ends in half a
		// UTF-8 sequence.
		return ClipText(s, n) + "…"
	}
	return s
}

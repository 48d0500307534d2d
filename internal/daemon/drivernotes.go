package daemon

import "github.com/simlock/simlock/internal/contract"

// driverNotes is, per platform with no driver, why: a refused device root
// first (it is what disabled a driver that was found), else the note the
// driver setup left (its detection's error, or that it is not enabled).
// NO_DRIVER carries it, so a refused request says what status would.
func driverNotes(notes map[contract.Platform]string, rejections map[contract.Platform]contract.RootRejection) map[contract.Platform]string {
	out := make(map[contract.Platform]string, len(notes)+len(rejections))
	for p, n := range notes {
		out[p] = n
	}
	for p, r := range rejections {
		why := "its device root " + r.Path + " was refused (" + r.Reason
		if r.Detail != "" {
			why += ": " + r.Detail
		}
		out[p] = why + "); simlock doctor says more"
	}
	return out
}

package contract

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Stage names a step of a lease request's wait.
type Stage string

// The stages a waiting requester sees, in the order they can happen.
const (
	StageQueued       Stage = "queued"
	StageDownloading  Stage = "downloading"
	StageReclaiming   Stage = "reclaiming"
	StageProvisioning Stage = "provisioning"
	StageBooting      Stage = "booting"
)

// Bounds of the downloading stage's fields.
const (
	MaxComponentLen = 64
	MaxPercent      = 100
)

// LeaseProgress is one step of a wait, pushed to the requester as it happens.
// Queued carries QueuePosition (from 1); downloading carries Component,
// Waiting (still behind another install) and, once the installer printed
// one, Percent; the other stages carry EtaMs.
type LeaseProgress struct {
	Stage         Stage
	QueuePosition int
	EtaMs         int64
	Component     string
	Waiting       bool
	// Percent is a whole number from 0 to 100, or nil while unknown.
	Percent *int
	// BytesDone and BytesTotal are a download's size so far and in all,
	// when the installer prints them (0 otherwise). They do not make a
	// step new by themselves (see Same): a step is sent once per percent.
	BytesDone, BytesTotal int64
	// Wait, on the queued step of the first in line, says what it waits
	// for; nil when the daemon does not know (and behind the first).
	Wait *QueueWait
	// Detail, on a booting step, says where the boot is, as the driver
	// sees it ("waiting for sys.boot_completed"); "" when it says nothing.
	Detail string
}

// MaxProgressDetailLen bounds a progress step's detail.
const MaxProgressDetailLen = 200

// QueueWait is what the first request in line waits for: a limit that is
// full, and the lease under it due to end soonest.
type QueueWait struct {
	// Limit is the full limit: WaitPlatformRunning, WaitMachineRunning,
	// WaitDevices or WaitRAM.
	Limit string `json:"limit"`
	// InUse and Max are the limit's use and size: devices running, or
	// kept; MiB for the RAM budget.
	InUse int `json:"inUse"`
	Max   int `json:"max"`
	// LeaseID, Holder (its requester id) and EndsAt (its TTL deadline, ms
	// since the epoch) name the lease under the limit that ends soonest
	// unless renewed; empty when no lease holds a slot of it.
	LeaseID string `json:"leaseId,omitempty"`
	Holder  string `json:"holder,omitempty"`
	EndsAt  int64  `json:"endsAt,omitempty"`
}

// The limits a queued request may wait on.
const (
	WaitPlatformRunning = "platform-running"
	WaitMachineRunning  = "machine-running"
	WaitDevices         = "devices"
	WaitRAM             = "ram-budget"
)

// Words says, for a person, what the first in line waits for: the full
// limit and the lease under it due to end first, counted down to now
// ("1/1 running: lse_… held by holder2, expires in 14m"). The CLI's live
// line and the MCP progress message both say it so.
func (w QueueWait) Words(now time.Time) string {
	limit, holder, ends := w.WordParts(now)
	if holder == "" {
		return limit
	}
	return limit + ": " + holder + ", " + ends
}

// WordParts are Words in its three parts, for a line that has room for
// only some of them: the limit reached, the lease whose end frees it and
// who holds it, and when that lease ends ("" for the last two when no
// lease is named).
func (w QueueWait) WordParts(now time.Time) (limit, holder, ends string) {
	switch w.Limit {
	case WaitMachineRunning:
		limit = fmt.Sprintf("%d/%d running on this machine", w.InUse, w.Max)
	case WaitDevices:
		limit = fmt.Sprintf("%d/%d devices exist, the most allowed", w.InUse, w.Max)
	case WaitRAM:
		limit = fmt.Sprintf("RAM budget %d/%d MiB in use", w.InUse, w.Max)
	default:
		limit = fmt.Sprintf("%d/%d running", w.InUse, w.Max)
	}
	if w.LeaseID == "" {
		return limit, "", ""
	}
	holder = w.LeaseID + " held by " + w.Holder
	left := time.UnixMilli(w.EndsAt).Sub(now)
	switch {
	case left <= 0:
		ends = "due to expire unless renewed"
	case left < time.Minute:
		ends = fmt.Sprintf("expires in %ds", int((left+time.Second-1)/time.Second))
	case left < time.Hour:
		ends = fmt.Sprintf("expires in %dm", int((left+time.Minute-1)/time.Minute))
	default:
		h := (left + time.Minute - 1) / time.Minute
		ends = fmt.Sprintf("expires in %dh%02dm", int(h/60), int(h%60))
	}
	return limit, holder, ends
}

// MaxDownloadBytes bounds a download's size read from the wire (1 PB).
const MaxDownloadBytes = 1_000_000_000_000_000

// CheckBytes refuses download sizes no installer prints: negative, past
// MaxDownloadBytes, or done past the total.
func CheckBytes(done, total int64) error {
	switch {
	case done < 0 || total < 0 || total > MaxDownloadBytes:
	case total == 0 && done != 0:
	case done > total:
	default:
		return nil
	}
	return BadRequest("bytesDone", "must be from 0 to bytesTotal, which is at most %d; got %d of %d", int64(MaxDownloadBytes), done, total)
}

// Bytes is a size as installers print it: decimal units (a GB is 10^9
// bytes), one decimal from MB up.
func Bytes(n int64) string {
	switch {
	case n >= 1e12:
		return fmt.Sprintf("%.1f TB", float64(n)/1e12)
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%d kB", n/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// SizeWords says how far a download is, for a person ("3.6 GB of 8.9
// GB"), or "" when its total is unknown. The CLI's bar and the MCP
// progress message both say it so.
func SizeWords(done, total int64) string {
	if total <= 0 {
		return ""
	}
	return Bytes(done) + " of " + Bytes(total)
}

// maxWaitCount bounds InUse and Max when read from the wire.
const maxWaitCount = 1 << 20

// check refuses a wait read from the wire that no daemon sends.
func (w *QueueWait) check() error {
	switch w.Limit {
	case WaitPlatformRunning, WaitMachineRunning, WaitDevices, WaitRAM:
	default:
		return BadRequest("wait.limit", "must be %s, %s, %s or %s", WaitPlatformRunning, WaitMachineRunning, WaitDevices, WaitRAM)
	}
	if w.InUse < 0 || w.InUse > maxWaitCount || w.Max < 0 || w.Max > maxWaitCount {
		return BadRequest("wait", "inUse and max must be from 0 to %d", maxWaitCount)
	}
	if len(w.LeaseID) > MaxIDLen || len(w.Holder) > MaxIDLen {
		return BadRequest("wait", "leaseId and holder must be at most %d characters", MaxIDLen)
	}
	// They are shown on terminals: no control characters (escapes).
	if strings.ContainsFunc(w.LeaseID+w.Holder, unicode.IsControl) {
		return BadRequest("wait", "leaseId and holder must be printable")
	}
	if w.EndsAt < 0 {
		return BadRequest("wait.endsAt", "must not be negative")
	}
	return nil
}

// MarshalJSON writes only the fields that belong to the stage.
func (p LeaseProgress) MarshalJSON() ([]byte, error) {
	switch p.Stage {
	case StageQueued:
		return json.Marshal(struct {
			Stage         Stage      `json:"stage"`
			QueuePosition int        `json:"queuePosition"`
			Wait          *QueueWait `json:"wait,omitempty"`
		}{p.Stage, p.QueuePosition, p.Wait})
	case StageDownloading:
		return json.Marshal(struct {
			Stage      Stage  `json:"stage"`
			Component  string `json:"component"`
			Waiting    bool   `json:"waiting"`
			Percent    *int   `json:"percent,omitempty"`
			BytesDone  int64  `json:"bytesDone,omitempty"`
			BytesTotal int64  `json:"bytesTotal,omitempty"`
		}{p.Stage, p.Component, p.Waiting, p.Percent, p.BytesDone, p.BytesTotal})
	}
	return json.Marshal(struct {
		Stage  Stage  `json:"stage"`
		EtaMs  int64  `json:"etaMs"`
		Detail string `json:"detail,omitempty"`
	}{p.Stage, p.EtaMs, p.Detail})
}

// UnmarshalJSON reads any stage, refusing a downloading step whose
// component or percent is out of bounds: a relayed push is checked before
// anyone acts on it.
func (p *LeaseProgress) UnmarshalJSON(b []byte) error {
	var w struct {
		Stage         Stage      `json:"stage"`
		QueuePosition int        `json:"queuePosition"`
		EtaMs         int64      `json:"etaMs"`
		Component     string     `json:"component"`
		Waiting       bool       `json:"waiting"`
		Percent       *int       `json:"percent"`
		Wait          *QueueWait `json:"wait"`
		BytesDone     int64      `json:"bytesDone"`
		BytesTotal    int64      `json:"bytesTotal"`
		Detail        string     `json:"detail"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if len(w.Detail) > MaxProgressDetailLen || !printable(w.Detail) {
		return BadRequest("detail", "must be at most %d printable characters", MaxProgressDetailLen)
	}
	if w.Wait != nil {
		if w.Stage != StageQueued {
			return BadRequest("wait", "belongs to the queued stage only")
		}
		if err := w.Wait.check(); err != nil {
			return err
		}
	}
	if w.Stage == StageDownloading {
		if w.Component == "" || len(w.Component) > MaxComponentLen {
			return BadRequest("component", "must be 1 to %d characters, got %d", MaxComponentLen, len(w.Component))
		}
		if w.Percent != nil && (*w.Percent < 0 || *w.Percent > MaxPercent) {
			return BadRequest("percent", "must be a whole number from 0 to %d, got %d", MaxPercent, *w.Percent)
		}
	}
	if err := CheckBytes(w.BytesDone, w.BytesTotal); err != nil {
		return err
	}
	*p = LeaseProgress{Stage: w.Stage, QueuePosition: w.QueuePosition, EtaMs: w.EtaMs, Component: w.Component, Waiting: w.Waiting, Percent: w.Percent,
		BytesDone: w.BytesDone, BytesTotal: w.BytesTotal, Wait: w.Wait, Detail: w.Detail}
	return nil
}

// printable reports whether s is valid UTF-8 with no control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// Same reports whether two steps say the same thing.
func (p LeaseProgress) Same(q LeaseProgress) bool {
	if p.Percent != nil && q.Percent != nil {
		if *p.Percent != *q.Percent {
			return false
		}
	} else if (p.Percent == nil) != (q.Percent == nil) {
		return false
	}
	if (p.Wait == nil) != (q.Wait == nil) || (p.Wait != nil && *p.Wait != *q.Wait) {
		return false
	}
	return p.Stage == q.Stage && p.QueuePosition == q.QueuePosition && p.EtaMs == q.EtaMs &&
		p.Component == q.Component && p.Waiting == q.Waiting && p.Detail == q.Detail
}

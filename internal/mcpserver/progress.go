package mcpserver

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// Progress runs 0..progressTotal in bands, one per stage, in the order a
// request moves through them, so it only ever rises as the wait goes on.
// Downloading has its band between queued and provisioning.
const (
	progressTotal = 5000
	bandSize      = 1000
)

var stageBand = map[string]float64{
	"queued":       0,
	"downloading":  1000,
	"reclaiming":   2000,
	"provisioning": 2000,
	"booting":      3000,
	"granted":      4000,
}

// reporter turns request snapshots into progress steps: a plain-words
// message and a number that strictly increases from one step to the next.
type reporter struct {
	last    float64
	lastMsg string
	sentAt  time.Time
	// stage and its start, to count an ETA down between daemon updates.
	stage      string
	stageRev   uint64
	stageStart time.Time
}

// step is the next progress notification for st at now, and whether one is
// due: on any change, or as a heartbeat every heartbeat.
func (r *reporter) step(st contract.LeaseRequestStatus, now time.Time, heartbeat time.Duration) (float64, string, bool) {
	phase := st.Phase()
	if phase != r.stage || st.Rev != r.stageRev {
		r.stage, r.stageRev, r.stageStart = phase, st.Rev, now
	}
	var remaining float64
	var msg string
	target := targetWords(st)
	switch phase {
	case "queued":
		pos := st.Request.QueuePosition
		remaining = float64(pos)
		switch {
		case pos == 0:
			// Not in the line yet: the daemon is still working out what
			// the request needs (a runtime to download, say).
			msg = "Preparing the request for " + target
		case pos == 1:
			msg = "First in line for " + target
			if p := st.Progress; p != nil && p.Stage == contract.StageQueued && p.Wait != nil {
				msg += " (" + p.Wait.Words(now) + ")"
			}
		case pos == 2:
			msg = "Queued behind 1 other request for " + target
		default:
			msg = fmt.Sprintf("Queued behind %d other requests for %s", pos-1, target)
		}
	case "granted":
		msg = "Leased " + target
	case "downloading":
		// Within its band the stage follows the installer's percentage; a
		// request still waiting behind another install sits at the base.
		var comp, size string
		var pct *int
		waiting := false
		if p := st.Progress; p != nil {
			comp, pct, waiting = p.Component, p.Percent, p.Waiting
			if s := contract.SizeWords(p.BytesDone, p.BytesTotal); s != "" {
				size = ", " + s
			}
		}
		switch {
		case waiting:
			msg = fmt.Sprintf("Waiting for another download to finish before runtime %s (for %s)", comp, target)
			remaining = math.Inf(1)
		case pct == nil:
			msg = fmt.Sprintf("Downloading runtime %s for %s", comp, target)
			remaining = math.Inf(1)
		default:
			msg = fmt.Sprintf("Downloading runtime %s for %s (%d%%%s)", comp, target, *pct, size)
			// 1000/(remaining+1) = pct*9.99 gives the band's share.
			if *pct > 0 {
				remaining = bandSize/(float64(*pct)*(bandSize-1)/100) - 1
			} else {
				remaining = math.Inf(1)
			}
		}
	default:
		left := int64(0)
		if st.Progress != nil {
			left = st.Progress.EtaMs - now.Sub(r.stageStart).Milliseconds()
		}
		secs := int(math.Ceil(float64(max(left, 0)) / 1000))
		remaining = float64(secs)
		verb := map[string]string{"provisioning": "Creating", "booting": "Booting"}[phase]
		if verb == "" {
			verb = strings.ToUpper(phase[:1]) + phase[1:]
		}
		msg = verb + " " + target
		if st.Progress != nil && st.Progress.Detail != "" {
			msg += ": " + st.Progress.Detail
		}
		if phase == "reclaiming" {
			// What is cleaned is a device another holder released, which
			// this request will get: name the device, not the request.
			msg = "Waiting for a released " + deviceNoun(st) + " to be cleaned"
		}
		if secs > 0 {
			msg += fmt.Sprintf(" (~%d s left)", secs)
		} else {
			msg += " (any moment now)"
		}
	}
	within := math.Min(math.Round(bandSize/(remaining+1)), bandSize-1)
	p := stageBand[phase] + within
	if phase == "granted" {
		p = progressTotal
	}
	due := msg != r.lastMsg || now.Sub(r.sentAt) >= heartbeat
	if !due {
		return 0, "", false
	}
	if p <= r.last {
		p = r.last + 1
	}
	r.last, r.lastMsg, r.sentAt = p, msg, now
	return p, msg, true
}

// targetWords names what the request waits for: the device being readied
// once known, else what was asked for.
func targetWords(st contract.LeaseRequestStatus) string {
	t := st.Target
	if g := st.Request.Grant; g != nil {
		t = &g.Device.Spec
	}
	if t != nil && t.Model != "" {
		if t.OSVersion != "" {
			return fmt.Sprintf("%s (%s %s)", t.Model, platformWord(t.Platform), t.OSVersion)
		}
		return t.Model
	}
	spec := st.Request.Spec
	var b strings.Builder
	switch {
	case spec.Model != "":
		b.WriteString(spec.Model)
	case spec.Class != "":
		b.WriteString("an " + platformWord(spec.Platform) + " " + string(spec.Class))
	default:
		b.WriteString("an " + platformWord(spec.Platform) + " device")
	}
	if spec.OSVersion != "" {
		b.WriteString(" (OS " + spec.OSVersion + ")")
	}
	return b.String()
}

// deviceNoun names a device of what st asks for: its model when known,
// else "iOS device" or "Android device".
func deviceNoun(st contract.LeaseRequestStatus) string {
	if t := st.Target; t != nil && t.Model != "" {
		return t.Model
	}
	if m := st.Request.Spec.Model; m != "" {
		return m
	}
	return platformWord(st.Request.Spec.Platform) + " device"
}

func platformWord(p contract.Platform) string {
	if p == contract.PlatformAndroid {
		return "Android"
	}
	return "iOS"
}

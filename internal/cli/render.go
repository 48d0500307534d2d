package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// progressJSON is the machine form of one progress step, one line on stderr:
// {"push":"progress","stage":"queued","queuePosition":1}.
func progressJSON(p contract.LeaseProgress) string {
	body, _ := json.Marshal(p)
	return `{"push":"progress",` + string(body[1:])
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// progressHuman is the live line a person sees: spinner, stage, and either
// the place in line or an ETA counting down. elapsed is the time since the
// step began; frame picks the spinner glyph.
func progressHuman(p contract.LeaseProgress, elapsed time.Duration, frame int) string {
	glyph := spinner[frame%len(spinner)]
	switch p.Stage {
	case contract.StageQueued:
		ahead := "next in line"
		switch {
		case p.QueuePosition == 2:
			ahead = "1 request ahead"
		case p.QueuePosition > 2:
			ahead = fmt.Sprintf("%d requests ahead", p.QueuePosition-1)
		}
		return fmt.Sprintf("%s Queued at position %d (%s), waiting %s", glyph, p.QueuePosition, ahead, roundDur(elapsed))
	case contract.StageReclaiming, contract.StageProvisioning, contract.StageBooting:
		left := time.Duration(p.EtaMs)*time.Millisecond - elapsed
		// Whole seconds rounded up: "about 0s left" never shows while
		// time is left.
		eta := "about " + roundDur((left+time.Second-1)/time.Second*time.Second) + " left"
		if left <= 0 {
			eta = "taking longer than usual, " + roundDur(elapsed) + " so far"
		}
		return fmt.Sprintf("%s %s, %s", glyph, stageWords(p.Stage), eta)
	case contract.StageDownloading:
		if p.Waiting {
			return fmt.Sprintf("%s Waiting for another download to finish before runtime %s, %s so far", glyph, p.Component, roundDur(elapsed))
		}
		if p.Percent == nil {
			return fmt.Sprintf("%s Downloading runtime %s, %s so far", glyph, p.Component, roundDur(elapsed))
		}
		return fmt.Sprintf("Downloading runtime %s %s %3d%%", p.Component, progressBar(*p.Percent, 24), *p.Percent)
	}
	return glyph + " " + string(p.Stage)
}

// progressBar draws pct (0-100) as a bar of width cells.
func progressBar(pct, width int) string {
	full := pct * width / 100
	return "[" + strings.Repeat("█", full) + strings.Repeat("░", width-full) + "]"
}

// stageWords says what a device stage is doing.
func stageWords(s contract.Stage) string {
	switch s {
	case contract.StageReclaiming:
		return "Waiting for a released device to be cleaned"
	case contract.StageProvisioning:
		return "Creating the device"
	case contract.StageBooting:
		return "Booting the device"
	}
	return strings.ToUpper(string(s[:1])) + string(s[1:])
}

// roundDur shows a duration in whole seconds (minutes past a minute).
func roundDur(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int(d.Round(time.Second) / time.Second)
	if s < 60 {
		return fmt.Sprintf("%ds", s)
	}
	return fmt.Sprintf("%dm%02ds", s/60, s%60)
}

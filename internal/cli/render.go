package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/simlock/simlock/internal/contract"
)

// progressJSON is the machine form of one progress step, one line on stderr:
// {"push":"progress","stage":"queued","queuePosition":1}.
func progressJSON(p contract.LeaseProgress) string {
	body, _ := json.Marshal(p)
	return `{"push":"progress",` + string(body[1:])
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// wanted names the device a request asks for, as the progress lines say
// it: the model when one was asked for, else the platform's device or the
// class asked for, with the OS version when one was given ("iPhone 17",
// "iOS 26.1 device", "iOS tablet with OS >=18 <27").
func wanted(in contract.LeaseRequestInput) string {
	noun := "device"
	if in.Class != "" {
		noun = string(in.Class)
	}
	name := platformName(in.Platform) + " " + noun
	if in.OSVersion != "" {
		if v, err := contract.ParseOSVersion(in.OSVersion); err == nil && v.IsRange() {
			name += " with OS " + in.OSVersion
		} else {
			name = platformName(in.Platform) + " " + in.OSVersion + " " + noun
		}
	}
	if in.Model != "" {
		name = in.Model
		if in.OSVersion != "" {
			name += " on " + platformName(in.Platform) + " " + in.OSVersion
		}
	}
	return name
}

func platformName(p contract.Platform) string {
	switch p {
	case contract.PlatformIOS:
		return "iOS"
	case contract.PlatformAndroid:
		return "Android"
	}
	return string(p)
}

// ordinal writes 1st, 2nd, 3rd, 4th, 11th, 21st.
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// progressHuman is the live line a person sees: spinner, what is happening
// to which device, and either the place in line (with what the first in
// line waits for) or an ETA counting down. elapsed is the time since the
// step began (for the queue, since the request began: time in line adds up
// across a download); now is the clock a lease's end is counted down
// against; frame picks the spinner glyph.
func progressHuman(p contract.LeaseProgress, device string, elapsed time.Duration, now time.Time, frame int) string {
	return liveLine(p, device, elapsed, now, frame, nil, 0)
}

// liveLine is progressHuman fitted to a terminal of width columns (0: no
// limit), with what rate knows of a download after its bar. What does not
// fit goes least useful first, so the line keeps what a person waits to
// read: a download's bar shrinks, then its speed, its sizes and the bar
// go, and its time left stays; in line, the holder of the lease waited
// for goes, then the count of requests ahead (the place says it), the
// time waited and the limit reached, and when that lease ends stays.
// Only then is the line cut.
func liveLine(p contract.LeaseProgress, device string, elapsed time.Duration, now time.Time, frame int, rate *downloadRate, width int) string {
	room := width - 1
	fits := func(line string) bool { return width <= 0 || utf8.RuneCountInString(line) <= room }
	glyph := spinner[frame%len(spinner)]
	switch {
	case p.Stage == contract.StageQueued:
		// drop: the higher, the sooner it goes; 0 stays.
		type part struct {
			text string
			drop int
		}
		ahead := ""
		switch {
		case p.QueuePosition == 2:
			ahead = " (1 request ahead)"
		case p.QueuePosition > 2:
			ahead = fmt.Sprintf(" (%d requests ahead)", p.QueuePosition-1)
		}
		head := []part{{fmt.Sprintf("%s Queued %s for %s", glyph, ordinal(p.QueuePosition), article(device)), 0},
			{ahead, 4}, {", waiting " + roundDur(elapsed), 3}}
		var why []part // said in parentheses, a comma between
		if p.Wait != nil {
			limit, holder, ends := p.Wait.WordParts(now)
			why = []part{{limit, 2}, {holder, 5}, {ends, 1}}
		}
		join := func() string {
			var b strings.Builder
			for _, x := range head {
				b.WriteString(x.text)
			}
			var in []string
			for i, x := range why {
				switch {
				case x.text == "":
				case i == 1 && why[0].text != "":
					// "3/3 running: lse_… held by a"
					in[len(in)-1] += ": " + x.text
				default:
					in = append(in, x.text)
				}
			}
			if len(in) > 0 {
				b.WriteString(" (" + strings.Join(in, ", ") + ")")
			}
			return b.String()
		}
		for line := join(); !fits(line); line = join() {
			worst := (*part)(nil)
			for _, ps := range [][]part{head, why} {
				for i := range ps {
					if x := &ps[i]; x.drop > 0 && x.text != "" && (worst == nil || x.drop > worst.drop) {
						worst = x
					}
				}
			}
			if worst == nil {
				break
			}
			worst.text = ""
		}
		return fitWidth(join(), width)
	case p.Stage == contract.StageDownloading && !p.Waiting && p.Percent != nil:
		head := fmt.Sprintf("Downloading runtime %s", p.Component)
		pct := fmt.Sprintf(" %3d%%", *p.Percent)
		var sizes, speed, left string
		if rate != nil {
			sizes, speed, left = rate.parts(*p.Percent, p.BytesDone, p.BytesTotal, now)
		}
		const barMax, barMin = 24, 8
		for _, drop := range []*string{nil, &speed, &sizes} {
			if drop != nil {
				*drop = ""
			}
			rest := utf8.RuneCountInString(head + pct + sizes + speed + left)
			bar := barMax
			if width > 0 {
				bar = min(barMax, room-rest-3) // " [" and "]"
			}
			if bar >= barMin {
				return head + " " + progressBar(*p.Percent, bar) + pct + sizes + speed + left
			}
		}
		return fitWidth(fmt.Sprintf("%s %d%%%s", head, *p.Percent, left), width)
	}
	return fitWidth(progressWords(p, device, elapsed, glyph), width)
}

// progressWords is the live line of a step that is neither a place in line
// nor a download's bar: the step in words with its ETA or time so far.
func progressWords(p contract.LeaseProgress, device string, elapsed time.Duration, glyph string) string {
	switch p.Stage {
	case contract.StageReclaiming, contract.StageProvisioning, contract.StageBooting:
		left := time.Duration(p.EtaMs)*time.Millisecond - elapsed
		// Whole seconds rounded up: "about 0s left" never shows while
		// time is left.
		eta := "about " + roundDur((left+time.Second-1)/time.Second*time.Second) + " left"
		if left <= 0 {
			eta = "taking longer than usual, " + roundDur(elapsed) + " so far"
		}
		words := stageWords(p.Stage, device)
		if p.Detail != "" {
			words += " (" + p.Detail + ")"
		}
		return fmt.Sprintf("%s %s, %s", glyph, words, eta)
	case contract.StageDownloading:
		if p.Waiting {
			return fmt.Sprintf("%s Waiting for another download to finish before runtime %s, %s so far", glyph, p.Component, roundDur(elapsed))
		}
		return fmt.Sprintf("%s Downloading runtime %s, %s so far", glyph, p.Component, roundDur(elapsed))
	}
	return glyph + " " + string(p.Stage)
}

// downloadRate follows one download's progress from the first step seen,
// to say its speed and the time left at that rate.
type downloadRate struct {
	at        time.Time // zero until a step with a percentage is seen
	fromPct   int
	fromBytes int64
}

// see notes a step: the first with a percentage starts the measure.
func (r *downloadRate) see(pct *int, bytes int64, now time.Time) {
	if pct != nil && r.at.IsZero() {
		r.at, r.fromPct, r.fromBytes = now, *pct, bytes
	}
}

// suffix is what follows the bar: the sizes when the installer printed
// them, the speed, and the time left at the rate seen so far, each once it
// means something (2 s, and 2 points or some bytes moved). The installers'
// own figures are all there is to go on; nothing is made up before them.
func (r *downloadRate) suffix(pct int, bytes, total int64, now time.Time) string {
	sizes, speed, left := r.parts(pct, bytes, total, now)
	return sizes + speed + left
}

// parts are suffix in its three parts, each with its leading separator or
// "": the sizes, the speed, and the time left.
func (r *downloadRate) parts(pct int, bytes, total int64, now time.Time) (sizes, speed, left string) {
	if total > 0 {
		sizes = " · " + contract.SizeWords(bytes, total)
	}
	took := now.Sub(r.at)
	if r.at.IsZero() || took < 2*time.Second || pct >= 100 {
		return sizes, "", ""
	}
	if moved := bytes - r.fromBytes; total > 0 && moved > 0 {
		speed = " · " + contract.Bytes(int64(float64(moved)/took.Seconds())) + "/s"
		rest := time.Duration(float64(total-bytes) / float64(moved) * float64(took))
		return sizes, speed, ", about " + roundDur((rest+time.Second-1)/time.Second*time.Second) + " left"
	}
	if moved := pct - r.fromPct; moved >= 2 {
		rest := took * time.Duration(100-pct) / time.Duration(moved)
		return sizes, "", ", about " + roundDur((rest+time.Second-1)/time.Second*time.Second) + " left"
	}
	return sizes, "", ""
}

// progressDone is the line a finished step leaves in the scrollback.
func progressDone(p contract.LeaseProgress, device string, took time.Duration) string {
	d := roundDur(took)
	switch p.Stage {
	case contract.StageQueued:
		return "✓ Waited " + d + " in line"
	case contract.StageReclaiming:
		return "✓ Cleaned a released " + device + " (" + d + ")"
	case contract.StageProvisioning:
		return "✓ Created a new " + device + " (" + d + ")"
	case contract.StageBooting:
		return "✓ Booted the " + device + " (" + d + ")"
	case contract.StageDownloading:
		if p.Waiting {
			return "✓ Waited " + d + " for another download"
		}
		return "✓ Downloaded runtime " + p.Component + " (" + d + ")"
	}
	return "✓ " + string(p.Stage) + " (" + d + ")"
}

// article puts "an" before a device kind, which wanted starts with its
// platform ("an iOS device", "an Android tablet"); a model name stands
// alone ("iPhone 17").
func article(device string) string {
	if strings.HasPrefix(device, platformName(contract.PlatformIOS)+" ") || strings.HasPrefix(device, platformName(contract.PlatformAndroid)+" ") {
		return "an " + device
	}
	return device
}

// fitWidth cuts a line to fit a terminal of width columns, leaving the last
// column free (a line that fills it makes some terminals wrap), so a redraw
// never wraps; every glyph these lines use is one column. Width 0 is
// unknown, and leaves the line whole.
func fitWidth(line string, width int) string {
	room := width - 1
	if width <= 0 || utf8.RuneCountInString(line) <= room {
		return line
	}
	r := []rune(line)
	return string(r[:max(room-1, 0)]) + "…"
}

// liveWidth is the width a live line is cut to on a terminal of width
// columns: two columns fewer, for the "^C" the terminal echoes at the
// cursor when the person interrupts. A line that reached the edge would
// wrap under the echo, and the clear that follows (which takes only the
// cursor's row) would leave it in the scrollback.
func liveWidth(width int) int {
	if width <= 0 {
		return 0
	}
	return max(width-2, 2)
}

// progressBar draws pct (0-100) as a bar of width cells.
func progressBar(pct, width int) string {
	full := pct * width / 100
	return "[" + strings.Repeat("█", full) + strings.Repeat("░", width-full) + "]"
}

// stageWords says what a device stage is doing to device.
func stageWords(s contract.Stage, device string) string {
	switch s {
	case contract.StageReclaiming:
		return "Cleaning a released " + device + " for you"
	case contract.StageProvisioning:
		return "Creating a new " + device
	case contract.StageBooting:
		return "Booting the " + device
	}
	return strings.ToUpper(string(s[:1])) + string(s[1:])
}

// roundDur shows a duration as a person reads it: whole seconds under a
// minute, minutes and seconds under an hour, hours and minutes under a
// day, then days and hours.
func roundDur(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
}

package demo

import (
	"bytes"
	"hash/fnv"
	"image"
	"image/color"
	"image/draw"
	"image/png"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The simulated screen: a phone-shaped picture in the device's own colour,
// its name and OS drawn on it, dark while the device's appearance is dark,
// so a screenshot shows which device it came from.
const (
	screenW, screenH = 180, 360
	// textX and textY place the first line; lineH is the line pitch of
	// basicfont's 7×13 face.
	textX, textY, lineH = 12, 40, 16
)

// screen is what a device shows: its lines of text, and whether it is in
// dark mode.
type screen struct {
	id    string
	lines []string
	dark  bool
}

// background is the screen's colour: the device's own hue (from its id),
// light, or dark in dark mode.
func (s screen) background() color.RGBA {
	h := fnv.New32a()
	h.Write([]byte(s.id))
	sum := h.Sum32()
	if s.dark {
		return color.RGBA{R: byte(sum) >> 3, G: byte(sum>>8) >> 3, B: byte(sum>>16) >> 3, A: 0xff}
	}
	return color.RGBA{R: 0xc0 | byte(sum)>>2, G: 0xc0 | byte(sum>>8)>>2, B: 0xc0 | byte(sum>>16)>>2, A: 0xff}
}

// ink is the text's colour, readable on the background.
func (s screen) ink() color.RGBA {
	if s.dark {
		return color.RGBA{R: 0xf0, G: 0xf0, B: 0xf0, A: 0xff}
	}
	return color.RGBA{A: 0xff}
}

// draw renders the screen.
func (s screen) draw() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, screenW, screenH))
	draw.Draw(img, img.Bounds(), &image.Uniform{C: s.background()}, image.Point{}, draw.Src)
	d := font.Drawer{Dst: img, Src: &image.Uniform{C: s.ink()}, Face: basicfont.Face7x13}
	for i, line := range s.lines {
		d.Dot = fixed.P(textX, textY+i*lineH)
		d.DrawString(line)
	}
	return img
}

// png encodes the screen.
func (s screen) png() ([]byte, error) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, s.draw()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

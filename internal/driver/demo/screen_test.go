package demo

import (
	"bytes"
	"image"
	"image/draw"
	"image/png"
	"testing"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// firstLine is the box of the screen's first line of text.
var firstLine = image.Rect(textX, textY-basicfont.Face7x13.Ascent, screenW, textY+basicfont.Face7x13.Descent)

// reference draws name alone where the screen's first line goes, on the
// screen's background: what the screenshot's first line must look like.
func reference(s screen, name string) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, screenW, screenH))
	draw.Draw(img, img.Bounds(), &image.Uniform{C: s.background()}, image.Point{}, draw.Src)
	d := font.Drawer{Dst: img, Src: &image.Uniform{C: s.ink()}, Face: basicfont.Face7x13, Dot: fixed.P(textX, textY)}
	d.DrawString(name)
	return img
}

func sameIn(a, b *image.RGBA, r image.Rectangle) bool {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if a.RGBAAt(x, y) != b.RGBAAt(x, y) {
				return false
			}
		}
	}
	return true
}

// A demo screenshot is a PNG with the device's name written on it (its
// first line is the name, pixel for pixel, and another name is not), in
// the device's own colour, dark in dark mode.
func TestTheScreenShowsTheDevicesName(t *testing.T) {
	s := screen{id: "dev_1", lines: []string{"Pixel 9", "android 36", "dev_1"}}
	b, err := s.png()
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	got := image.NewRGBA(decoded.Bounds())
	draw.Draw(got, got.Bounds(), decoded, image.Point{}, draw.Src)
	if got.Bounds() != image.Rect(0, 0, screenW, screenH) {
		t.Fatalf("the screenshot is %v, want %dx%d", got.Bounds(), screenW, screenH)
	}
	if !sameIn(got, reference(s, "Pixel 9"), firstLine) {
		t.Error("the screenshot's first line is not the device's name")
	}
	if sameIn(got, reference(s, "Pixel 8"), firstLine) {
		t.Error("the screenshot's first line reads as another name too: the check shows nothing")
	}
	if other := (screen{id: "dev_2"}); other.background() == s.background() {
		t.Error("two devices have the same colour")
	}
	dark := s
	dark.dark = true
	if bg := dark.background(); int(bg.R)+int(bg.G)+int(bg.B) >= int(s.background().R)+int(s.background().G)+int(s.background().B) {
		t.Errorf("dark mode's background %v is not darker than light's %v", bg, s.background())
	}
}

package report

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"time"

	"github.com/januskv/janus/bench/internal/hist"
)

var (
	white = color.RGBA{255, 255, 255, 255}
	black = color.RGBA{30, 30, 30, 255}
	grey  = color.RGBA{220, 220, 220, 255}
	// palette colours series in order; systems keep their colour across
	// charts because the report always lists them in the same order.
	palette = []color.RGBA{
		{31, 119, 180, 255},  // blue
		{44, 160, 44, 255},   // green
		{255, 127, 14, 255},  // orange
		{148, 103, 189, 255}, // purple
		{214, 39, 40, 255},   // red
		{140, 86, 75, 255},   // brown
	}
)

const (
	chartW, chartH = 960, 540
	marginL        = 110
	marginR        = 30
	marginT        = 84
	marginB        = 90
)

type plot struct {
	img                   *image.RGBA
	x0, y0, x1, y1        int // plot area: x0,y1 is the bottom left
	title, xLabel, yLabel string
}

func newPlot(title, xLabel, yLabel string) *plot {
	img := image.NewRGBA(image.Rect(0, 0, chartW, chartH))
	draw.Draw(img, img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)
	p := &plot{img: img, x0: marginL, y0: marginT, x1: chartW - marginR, y1: chartH - marginB,
		title: title, xLabel: xLabel, yLabel: yLabel}
	drawText(img, (chartW-textWidth(title))/2, 16, title, black)
	drawText(img, p.x0+(p.x1-p.x0-textWidth(xLabel))/2, chartH-lineHeight-4, xLabel, black)
	drawTextUp(img, 10, p.y0+(p.y1-p.y0+textWidth(yLabel))/2, yLabel, black)
	return p
}

func (p *plot) hline(y int, c color.Color) {
	for x := p.x0; x <= p.x1; x++ {
		p.img.Set(x, y, c)
	}
}

func (p *plot) vline(x int, c color.Color) {
	for y := p.y0; y <= p.y1; y++ {
		p.img.Set(x, y, c)
	}
}

func (p *plot) rect(x0, y0, x1, y1 int, c color.Color) {
	draw.Draw(p.img, image.Rect(x0, y0, x1, y1), &image.Uniform{c}, image.Point{}, draw.Src)
}

// line draws a line 2 pixels wide (Bresenham, thickened).
func (p *plot) line(xa, ya, xb, yb int, c color.Color) {
	dx, dy := abs(xb-xa), -abs(yb-ya)
	sx, sy := sign(xb-xa), sign(yb-ya)
	e := dx + dy
	for {
		p.rect(xa-1, ya-1, xa+1, ya+1, c)
		if xa == xb && ya == yb {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			xa += sx
		}
		if e2 <= dx {
			e += dx
			ya += sy
		}
	}
}

func (p *plot) axes() {
	p.hline(p.y1, black)
	p.vline(p.x0, black)
}

// legend draws the series names with their colours at the top right;
// empty names are left out, keeping the others' colours.
func (p *plot) legend(names []string) {
	x := p.x1 - 10
	for i := len(names) - 1; i >= 0; i-- {
		if names[i] == "" {
			continue
		}
		x -= textWidth(names[i]) + 26
		p.rect(x, p.y0-30, x+16, p.y0-16, palette[i%len(palette)])
		drawText(p.img, x+20, p.y0-30, names[i], black)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// niceStep returns a round tick step (1, 2 or 5 times a power of ten) that
// splits [0, max] into about n intervals.
func niceStep(maxV float64, n int) float64 {
	if maxV <= 0 {
		return 1
	}
	raw := maxV / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

func formatCount(v float64) string {
	switch {
	case v >= 1e6:
		return trimZero(fmt.Sprintf("%.1fM", v/1e6))
	case v >= 1e3:
		return trimZero(fmt.Sprintf("%.1fk", v/1e3))
	}
	return trimZero(fmt.Sprintf("%.1f", v))
}

func trimZero(s string) string {
	for _, suf := range []string{".0k", ".0M"} {
		if len(s) > len(suf) && s[len(s)-len(suf):] == suf {
			return s[:len(s)-len(suf)] + suf[2:]
		}
	}
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		return s[:len(s)-2]
	}
	return s
}

// BarChart draws grouped bars: one group per entry of groups, one bar per
// series within each group; values[g][s] < 0 means no bar (the system does
// not speak that workload's protocol).
func BarChart(w io.Writer, title, yLabel string, groups, series []string, values [][]float64) error {
	p := newPlot(title, "", yLabel)
	maxV := 0.0
	for _, row := range values {
		for _, v := range row {
			maxV = max(maxV, v)
		}
	}
	step := niceStep(maxV*1.1, 6)
	top := math.Ceil(maxV*1.1/step) * step
	if top == 0 {
		top = 1
	}
	yOf := func(v float64) int { return p.y1 - int(v/top*float64(p.y1-p.y0)) }
	for v := 0.0; v <= top+step/2; v += step {
		y := yOf(v)
		p.hline(y, grey)
		label := formatCount(v)
		drawText(p.img, p.x0-8-textWidth(label), y-glyphH, label, black)
	}
	p.axes()
	if len(groups) > 0 && len(series) > 0 {
		groupW := (p.x1 - p.x0) / len(groups)
		barW := max(4, (groupW-30)/len(series))
		for g, name := range groups {
			gx := p.x0 + g*groupW + (groupW-barW*len(series))/2
			for s := range series {
				if s >= len(values[g]) || values[g][s] < 0 {
					continue
				}
				x := gx + s*barW
				p.rect(x+2, yOf(values[g][s]), x+barW-2, p.y1, palette[s%len(palette)])
				label := formatCount(values[g][s])
				if textWidth(label) <= barW+8 {
					drawText(p.img, x+(barW-textWidth(label))/2, yOf(values[g][s])-lineHeight, label, black)
				}
			}
			drawText(p.img, p.x0+g*groupW+(groupW-textWidth(name))/2, p.y1+10, name, black)
		}
	}
	p.legend(series)
	return png.Encode(w, p.img)
}

// nines maps a quantile to the x axis of a percentile curve: 0.9 is 1,
// 0.99 is 2, 0.999 is 3...; the maximum (q = 1) is drawn at maxNines.
const maxNines = 4.5

func nines(q float64) float64 {
	if q >= 1 {
		return maxNines
	}
	return min(-math.Log10(1-q), maxNines)
}

// LatencyChart draws latency percentile curves, one per series, with
// curves[s][i] the latency at hist.CurveQuantiles[i]; the y axis is
// logarithmic so that medians and tails both show. An empty curve draws
// nothing.
func LatencyChart(w io.Writer, title string, series []string, curves [][]time.Duration) error {
	p := newPlot(title, "percentile", "latency")
	lo, hi := math.Inf(1), 0.0
	for _, c := range curves {
		for _, d := range c {
			v := max(float64(d), float64(time.Microsecond))
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if hi == 0 {
		lo, hi = float64(time.Microsecond), float64(time.Second)
	}
	logLo, logHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if logHi <= logLo {
		logHi = logLo + 1
	}
	yOf := func(v float64) int {
		f := (math.Log10(max(v, float64(time.Microsecond))) - logLo) / (logHi - logLo)
		return p.y1 - int(f*float64(p.y1-p.y0))
	}
	xOf := func(q float64) int { return p.x0 + int(nines(q)/maxNines*float64(p.x1-p.x0)) }
	for e := logLo; e <= logHi; e++ {
		y := yOf(math.Pow(10, e))
		p.hline(y, grey)
		label := durLabel(time.Duration(math.Pow(10, e)))
		drawText(p.img, p.x0-8-textWidth(label), y-glyphH, label, black)
	}
	for _, t := range []struct {
		q     float64
		label string
	}{{0, "0"}, {0.9, "90"}, {0.99, "99"}, {0.999, "99.9"}, {0.9999, "99.99"}, {1, "max"}} {
		x := xOf(t.q)
		p.vline(x, grey)
		drawText(p.img, x-textWidth(t.label)/2, p.y1+10, t.label, black)
	}
	p.axes()
	for s, c := range curves {
		if len(c) != len(hist.CurveQuantiles) {
			continue
		}
		col := palette[s%len(palette)]
		for i := 1; i < len(c); i++ {
			p.line(xOf(hist.CurveQuantiles[i-1]), yOf(float64(c[i-1])), xOf(hist.CurveQuantiles[i]), yOf(float64(c[i])), col)
		}
	}
	shown := make([]string, len(series))
	for i, name := range series {
		if i < len(curves) && len(curves[i]) > 0 {
			shown[i] = name
		}
	}
	p.legend(shown)
	return png.Encode(w, p.img)
}

// durLabel formats a power-of-ten duration in ASCII (the chart font has
// no µ).
func durLabel(d time.Duration) string {
	switch {
	case d >= time.Second:
		return trimZero(fmt.Sprintf("%.1f", d.Seconds())) + "s"
	case d >= time.Millisecond:
		return trimZero(fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))) + "ms"
	case d >= time.Microsecond:
		return trimZero(fmt.Sprintf("%.1f", float64(d)/float64(time.Microsecond))) + "us"
	}
	return fmt.Sprintf("%dns", int64(d))
}

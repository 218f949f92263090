package report

import (
	"image"
	"image/color"
	"strings"
)

// A 5x7 bitmap font, enough for chart labels without a font dependency.
// Lower-case letters are drawn as capitals.
var glyphs = map[rune][7]string{
	'0': {" ### ", "#   #", "#  ##", "# # #", "##  #", "#   #", " ### "},
	'1': {"  #  ", " ##  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "},
	'2': {" ### ", "#   #", "    #", "   # ", "  #  ", " #   ", "#####"},
	'3': {"#####", "   # ", "  #  ", "   # ", "    #", "#   #", " ### "},
	'4': {"   # ", "  ## ", " # # ", "#  # ", "#####", "   # ", "   # "},
	'5': {"#####", "#    ", "#### ", "    #", "    #", "#   #", " ### "},
	'6': {"  ## ", " #   ", "#    ", "#### ", "#   #", "#   #", " ### "},
	'7': {"#####", "    #", "   # ", "  #  ", " #   ", " #   ", " #   "},
	'8': {" ### ", "#   #", "#   #", " ### ", "#   #", "#   #", " ### "},
	'9': {" ### ", "#   #", "#   #", " ####", "    #", "   # ", " ##  "},
	'A': {" ### ", "#   #", "#   #", "#####", "#   #", "#   #", "#   #"},
	'B': {"#### ", "#   #", "#   #", "#### ", "#   #", "#   #", "#### "},
	'C': {" ### ", "#   #", "#    ", "#    ", "#    ", "#   #", " ### "},
	'D': {"#### ", "#   #", "#   #", "#   #", "#   #", "#   #", "#### "},
	'E': {"#####", "#    ", "#    ", "#### ", "#    ", "#    ", "#####"},
	'F': {"#####", "#    ", "#    ", "#### ", "#    ", "#    ", "#    "},
	'G': {" ### ", "#   #", "#    ", "# ###", "#   #", "#   #", " ####"},
	'H': {"#   #", "#   #", "#   #", "#####", "#   #", "#   #", "#   #"},
	'I': {" ### ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "},
	'J': {"  ###", "   # ", "   # ", "   # ", "   # ", "#  # ", " ##  "},
	'K': {"#   #", "#  # ", "# #  ", "##   ", "# #  ", "#  # ", "#   #"},
	'L': {"#    ", "#    ", "#    ", "#    ", "#    ", "#    ", "#####"},
	'M': {"#   #", "## ##", "# # #", "# # #", "#   #", "#   #", "#   #"},
	'N': {"#   #", "#   #", "##  #", "# # #", "#  ##", "#   #", "#   #"},
	'O': {" ### ", "#   #", "#   #", "#   #", "#   #", "#   #", " ### "},
	'P': {"#### ", "#   #", "#   #", "#### ", "#    ", "#    ", "#    "},
	'Q': {" ### ", "#   #", "#   #", "#   #", "# # #", "#  # ", " ## #"},
	'R': {"#### ", "#   #", "#   #", "#### ", "# #  ", "#  # ", "#   #"},
	'S': {" ####", "#    ", "#    ", " ### ", "    #", "    #", "#### "},
	'T': {"#####", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  "},
	'U': {"#   #", "#   #", "#   #", "#   #", "#   #", "#   #", " ### "},
	'V': {"#   #", "#   #", "#   #", "#   #", "#   #", " # # ", "  #  "},
	'W': {"#   #", "#   #", "#   #", "# # #", "# # #", "# # #", " # # "},
	'X': {"#   #", "#   #", " # # ", "  #  ", " # # ", "#   #", "#   #"},
	'Y': {"#   #", "#   #", " # # ", "  #  ", "  #  ", "  #  ", "  #  "},
	'Z': {"#####", "    #", "   # ", "  #  ", " #   ", "#    ", "#####"},
	' ': {"     ", "     ", "     ", "     ", "     ", "     ", "     "},
	'.': {"     ", "     ", "     ", "     ", "     ", " ##  ", " ##  "},
	',': {"     ", "     ", "     ", "     ", " ##  ", "  #  ", " #   "},
	':': {"     ", " ##  ", " ##  ", "     ", " ##  ", " ##  ", "     "},
	'/': {"     ", "    #", "   # ", "  #  ", " #   ", "#    ", "     "},
	'%': {"##   ", "##  #", "   # ", "  #  ", " #   ", "#  ##", "   ##"},
	'-': {"     ", "     ", "     ", "#####", "     ", "     ", "     "},
	'_': {"     ", "     ", "     ", "     ", "     ", "     ", "#####"},
	'+': {"     ", "  #  ", "  #  ", "#####", "  #  ", "  #  ", "     "},
	'=': {"     ", "     ", "#####", "     ", "#####", "     ", "     "},
	'(': {"   # ", "  #  ", " #   ", " #   ", " #   ", "  #  ", "   # "},
	')': {" #   ", "  #  ", "   # ", "   # ", "   # ", "  #  ", " #   "},
	'*': {"     ", "  #  ", "# # #", " ### ", "# # #", "  #  ", "     "},
	'<': {"   # ", "  #  ", " #   ", "#    ", " #   ", "  #  ", "   # "},
	'>': {" #   ", "  #  ", "   # ", "    #", "   # ", "  #  ", " #   "},
	'?': {" ### ", "#   #", "    #", "   # ", "  #  ", "     ", "  #  "},
}

const (
	glyphW, glyphH = 5, 7
	fontScale      = 2
	// charAdvance and lineHeight are in pixels at fontScale.
	charAdvance = (glyphW + 1) * fontScale
	lineHeight  = (glyphH + 3) * fontScale
)

// textWidth is the width in pixels of s drawn by drawText.
func textWidth(s string) int { return len([]rune(s)) * charAdvance }

// drawText draws s with its top-left corner at (x, y).
func drawText(img *image.RGBA, x, y int, s string, c color.Color) {
	for _, r := range strings.ToUpper(s) {
		g, ok := glyphs[r]
		if !ok {
			g = glyphs['?']
		}
		for row, bits := range g {
			for col, b := range bits {
				if b != '#' {
					continue
				}
				for dy := range fontScale {
					for dx := range fontScale {
						img.Set(x+col*fontScale+dx, y+row*fontScale+dy, c)
					}
				}
			}
		}
		x += charAdvance
	}
}

// drawTextUp draws s rotated a quarter turn counter-clockwise, reading
// bottom to top, with its bottom-left corner at (x, y): for y-axis titles.
func drawTextUp(img *image.RGBA, x, y int, s string, c color.Color) {
	for _, r := range strings.ToUpper(s) {
		g, ok := glyphs[r]
		if !ok {
			g = glyphs['?']
		}
		for row, bits := range g {
			for col, b := range bits {
				if b != '#' {
					continue
				}
				for dy := range fontScale {
					for dx := range fontScale {
						img.Set(x+row*fontScale+dx, y-col*fontScale-dy, c)
					}
				}
			}
		}
		y -= charAdvance
	}
}

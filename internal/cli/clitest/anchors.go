package clitest

import (
	"strconv"
	"strings"
	"unicode"
)

// Anchors are the #fragments GitHub gives the headings of a Markdown page:
// every ATX heading (# to ######) outside fenced code, each as HeadingSlug
// says, a repeated one with -1, -2, … after it as GitHub numbers them. The
// manual's links (TestDocLinksResolve) and the alerts' runbook URLs
// (deploy's TestEveryAlertHasARunbook) are checked against them.
func Anchors(markdown string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inCode := false
	for line := range strings.Lines(markdown) {
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
			inCode = !inCode
			continue
		}
		if inCode {
			continue
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level == 0 || level > 6 || level < len(line) && line[level] != ' ' {
			continue
		}
		slug := HeadingSlug(strings.TrimRight(line[level:], "# "))
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// HeadingSlug is the anchor GitHub gives a heading's text: lower case,
// each space a hyphen, and of everything else only letters, marks, digits,
// hyphens and underscores kept (so backquotes, dots, slashes, apostrophes
// and dashes other than the hyphen are dropped; Korean stays).
func HeadingSlug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

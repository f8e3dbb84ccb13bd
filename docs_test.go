package bulkreg_test

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bulkreg/bulkreg/internal/cli/clitest"
)

// Docs and comments say what holds and why; how it came to hold (which
// commit or issue, which seed of the fault simulation, which machine a
// bench ran on, what the code did before) is history, kept in commit messages,
// CHANGELOG.md and bench/HISTORY.md.

// historyIn is the history a line carries: each finding names what it is.
// A match is not history when its pattern's first group, the word before
// it (or, at a line's start, the previous line's last word), is one that
// excuse matches.
var historyIn = []struct {
	what   string
	re     *regexp.Regexp
	excuse *regexp.Regexp
}{
	// A seed of the fault simulation or a bench: the word, then its
	// number (or an equals sign and the number, as make soak takes it).
	{"a seed number", regexp.MustCompile(`(?i)\bseeds?\s*(?:=|:|#|\s)\s*#?\d+`), nil},
	{"a machine number", regexp.MustCompile(`(?i)\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|\d+(?:st|nd|rd|th))\s+machines?\b|\bmachines?\s+(?:no\.\s*|#)?\d+\b`), nil},
	// A habit of the past is history; the passive (what is used to sign
	// a token) says what holds.
	{`"used to"`, regexp.MustCompile(`(?i)(?:\b(\w+)\s+)?\bused to\b`), regexp.MustCompile(`(?i)^(?:is|are|be|been|being|get|gets|getting)$`)},
	// Which issue asked for a change is the commit's to say.
	{"an issue number", regexp.MustCompile(`(?i)\bissues?\s+#?\d+|(?:^|[\s(\[])#\d+\b`), nil},
	// A build measured against the one before it belongs in commit
	// messages and bench/HISTORY.md; the manual says what a mechanism buys
	// (with it, without it).
	{"a comparison with an earlier build", regexp.MustCompile(`(?i)\b(?:the|an?|that) builds? before\b|\bbefore\)?[,;]?\s+\S+\s+now\b`), nil},
}

// commitLike is a commit's abbreviation or whole hash: 7 to 40 lowercase
// hex digits, a digit and a letter among them (a word of a line split at
// everything but letters, digits and underscores), unless it is a name
// that only looks like one.
var commitLike = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// hexNames are words of hex digits that are names, not commits.
var hexNames = []string{"ed25519"}

// notHistory is text a hex-looking token may stand in without being a
// commit: a URL, a checksum or digest, a Go pseudo-version, an upload id (16
// hex digits after the word).
var notHistory = regexp.MustCompile(`https?://\S+|\b(?:sha256|sha512|sha1|md5|h1)[:=-]\S+|\bv\d+\.\d+\.\d+-(?:0\.)?\d{14}-[0-9a-f]{12}\b|(?i)\bupload(?:_id)?[ =:"]+[0-9a-f]{16}\b`)

// historyFindings returns "where: what" for each piece of history in text,
// whose first line is line first of file.
func historyFindings(file string, first int, text string) []string {
	var out []string
	prevWord := ""
	for i, line := range strings.Split(text, "\n") {
		line = notHistory.ReplaceAllString(line, " ")
		words := strings.FieldsFunc(line, func(r rune) bool {
			return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_')
		})
		for _, w := range words {
			if commitLike.MatchString(w) && strings.ContainsAny(w, "0123456789") && strings.ContainsAny(w, "abcdef") && !slices.Contains(hexNames, w) {
				out = append(out, fmt.Sprintf("%s:%d: a commit hash (%q)", file, first+i, w))
			}
		}
		for _, h := range historyIn {
			for _, m := range h.re.FindAllStringSubmatchIndex(line, -1) {
				if h.excuse != nil {
					before := prevWord
					if m[2] >= 0 {
						before = line[m[2]:m[3]]
					} else if strings.TrimSpace(line[:m[0]]) != "" {
						before = ""
					}
					if h.excuse.MatchString(before) {
						continue
					}
				}
				out = append(out, fmt.Sprintf("%s:%d: %s (%q)", file, first+i, h.what, strings.TrimSpace(line[m[0]:m[1]])))
			}
		}
		prevWord = ""
		if len(words) > 0 {
			prevWord = words[len(words)-1]
		}
	}
	return out
}

// TestHistoryFindings holds the patterns to what they are for: each line of
// history is found, and the text that only looks like it is not.
func TestHistoryFindings(t *testing.T) {
	for _, c := range []struct {
		line string
		want string // "" for none
	}{
		{"fixed in 035c3c2, unconfirmed", "a commit hash"},
		{"919e26a (before the change)", "a commit hash"},
		{"(cdb2965, 3 pairs)", "a commit hash"},
		{"919e26a 4aea5a0 74bc1ac", "a commit hash"},
		{"the full 7e0a9dbbef2e06b03858fa1b79cb62d85841b8fa", "a commit hash"},
		{"**7013**, fixed: a 429", ""},
		{"seed 7013 found it", "a seed number"},
		{"seeds 404 and 515: 429s", "a seed number"},
		{"make soak SEED=303", "a seed number"},
		{"on the eighteenth machine (2 cores)", "a machine number"},
		{"The figures of the Seventh Machine", "a machine number"},
		{"each used to run a script of its own", `"used to"`},
		{"Used to be one call", `"used to"`},
		{"what issue 27 found", "an issue number"},
		{"(issues 26 and 29)", "an issue number"},
		{"golang/go#75804, fixed in Go 1.27", ""},
		{"the seed a failing run printed: SEED=n", ""},
		{"seeds from 30000 on draw production's ratio", ""},
		{"30 seeded mixes of one call", ""},
		{"see https://github.com/bulkreg/bulkreg/commit/035c3c2abc", ""},
		{"image@sha256:4f2a9c0e1b7d", ""},
		{"golang.org/x/vulndb v0.0.0-20261105234957-e22db6528018", ""},
		{"a deadbeef value, 1234567 rows, 16 hex digits", ""},
		{"RS256 or ed25519 keys", ""},
		{"registered as P-17 by upload 9f86d081884c7d65 row 5", ""},
		{"the upload 9f86d081884c7d65abc (not an upload id)", "a commit hash"},
		{"0x1f2e3d4c5b and e2e and abc_1234567", ""},
		{"on one machine, then another machine", ""},
		{"seed #17003 and seed: 404", "a seed number"},
		{"measured on the 7th machine", "a machine number"},
		{"on machine #8, then machine 9", "a machine number"},
		{"a machine with 2 cores; 8 machines", ""},
		{"the key is used to sign tokens", ""},
		{"the keys are used to verify", ""},
		{"the secret that is\nused to sign tokens", ""},
		{"the last line\nused to run alone", `"used to"`},
		{"what #30 asked for", "an issue number"},
		{"(#26, #29)", "an issue number"},
		{"row 5 of sheet#2", ""},
		{"runs interleaved with the build before: 3.2 → 0.8", "a comparison with an earlier build"},
		{"3 × 429 before, 0 now", "a comparison with an earlier build"},
		{"a bucket API (1 × 429 before), 0 now.", "a comparison with an earlier build"},
		{"a row finished before the hold; the hold is now + W", ""},
		{"upgrading from a version before 0.4.0", ""},
		{"done before the window, and now the next", ""},
	} {
		got := historyFindings("f", 1, c.line)
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%q: found %v, want nothing", c.line, got)
		case c.want != "" && !slices.ContainsFunc(got, func(f string) bool { return strings.Contains(f, c.want) }):
			t.Errorf("%q: found %v, want %s", c.line, got, c.want)
		}
	}
	if got := historyFindings("README.md", 10, "fine\nseed 12 here"); len(got) != 1 || !strings.HasPrefix(got[0], "README.md:11: a seed number") {
		t.Errorf("the finding names file:line: %v", got)
	}
}

// TestNoHistoryInDocs: the manual (README.md, ARCHITECTURE.md, SECURITY.md,
// docs/) says what holds. bench/HISTORY.md and CHANGELOG.md are where
// history goes.
func TestNoHistoryInDocs(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"README.md", "ARCHITECTURE.md", "SECURITY.md"}, files...)
	if len(files) < 6 {
		t.Fatalf("found %d documents; the glob is broken", len(files))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range historyFindings(f, 1, string(raw)) {
			t.Error(p)
		}
	}
}

// commentsNotYetClean are the directories left out of
// TestNoHistoryInComments while their Go comments still carry history. It
// is empty: every directory is checked. A directory put here while its
// comments are cleaned leaves the list once they pass.
var commentsNotYetClean = []string{}

// TestNoHistoryInComments: every comment of every Go file (tests
// included, testdata not) and of every Lua script says what holds, outside
// commentsNotYetClean.
func TestNoHistoryInComments(t *testing.T) {
	n := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || slices.Contains(commentsNotYetClean, filepath.ToSlash(path))) {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".go"):
			n++
			for _, p := range commentHistory(t, path) {
				t.Error(p)
			}
		case strings.HasSuffix(path, ".lua"):
			for _, p := range luaCommentHistory(t, path) {
				t.Error(p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Fatalf("read %d Go files; the walk is broken", n)
	}
	for _, dir := range commentsNotYetClean {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("commentsNotYetClean names %s: %v", dir, err)
		}
	}
}

// luaCommentHistory returns the history in the comments of the Lua script at
// path: a line's text from its first "--" that starts the line or follows a
// space.
func luaCommentHistory(t *testing.T, path string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, line := range strings.Split(string(src), "\n") {
		c, ok := strings.CutPrefix(strings.TrimSpace(line), "--")
		if !ok {
			_, c, ok = strings.Cut(line, " --")
		}
		if ok {
			out = append(out, historyFindings(filepath.ToSlash(path), i+1, c)...)
		}
	}
	return out
}

// commentHistory returns the history in the comments of the Go file at path.
func commentHistory(t *testing.T, path string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	file := fset.AddFile(path, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var out []string
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok == token.COMMENT {
			out = append(out, historyFindings(filepath.ToSlash(path), fset.Position(pos).Line, lit)...)
		}
	}
}

// TestDocLinksResolve: every relative link of the manual (README.md,
// ARCHITECTURE.md, docs/*.md, SECURITY.md, CHANGELOG.md) names a file that
// exists and, with a #fragment, a heading of that file, so moving a section
// cannot leave a link behind.
func TestDocLinksResolve(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"README.md", "ARCHITECTURE.md", "SECURITY.md", "CHANGELOG.md"}, files...)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)|<img src="([^"]+)"`)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		anchors[path] = clitest.Anchors(string(raw))
		return anchors[path]
	}
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1] + m[2]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				n++
				path, frag, _ := strings.Cut(target, "#")
				if path == "" {
					path = f
				} else {
					path = filepath.Join(filepath.Dir(f), path)
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %s: no file %s", f, i+1, target, path)
					continue
				}
				if frag != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[frag] {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", f, i+1, target, path, frag)
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("found %d relative links; the pattern is broken", n)
	}
}

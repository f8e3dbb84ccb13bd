// The shared strings part and the bounded text every cell's text is read into.

package excel

import (
	"archive/zip"
	"bytes"
	"math"
	"strconv"
	"unicode/utf8"
)

// sharedStrings is the workbook's table of texts, one arena: entry i is
// arena[ends[i-1]:ends[i]], at most MaxCellBytes of it kept. An entry costs
// 9 bytes besides its text (as ints and a slice each, 13 million empty
// entries would cost 683 MB), and there are at most maxSharedStrings of
// them.
type sharedStrings struct {
	arena []byte
	ends  []uint32
	runes []int32 // characters of the whole entry (a part holds fewer than 2^31 bytes)
	cut   []bool  // the entry is longer than what is kept
}

func (s *sharedStrings) entry(i int) (text []byte, runes int, cut bool) {
	start := uint32(0)
	if i > 0 {
		start = s.ends[i-1]
	}
	return s.arena[start:s.ends[i]], int(s.runes[i]), s.cut[i]
}

// boundedText gathers one cell's text from chunks: at most max bytes are
// kept (cut at a character), every character is counted.
type boundedText struct {
	buf   []byte
	max   int
	runes int
	cut   bool
}

func (t *boundedText) reset() { t.buf, t.runes, t.cut = t.buf[:0], 0, false }

func (t *boundedText) write(p []byte) {
	t.runes += utf8.RuneCount(p)
	if t.cut {
		return
	}
	if room := t.max - len(t.buf); len(p) > room {
		for room > 0 && !utf8.RuneStart(p[room]) {
			room--
		}
		t.buf = append(t.buf, p[:room]...)
		t.cut = true
		return
	}
	t.buf = append(t.buf, p...)
}

// unescape decodes the escapes Excel writes for characters XML cannot hold
// ("_x000D_" for a carriage return, "_x005F_" for a literal "_"), as Excel
// and excelize read them. A cut text keeps the count of its raw characters.
func (t *boundedText) unescape() {
	if !bytes.Contains(t.buf, []byte("_x")) {
		return
	}
	out := make([]byte, 0, len(t.buf))
	b := t.buf
	for len(b) > 0 {
		i := bytes.Index(b, []byte("_x"))
		if i < 0 || i+7 > len(b) {
			out = append(out, b...)
			break
		}
		out = append(out, b[:i]...)
		esc := b[i : i+7]
		n, err := strconv.ParseUint(string(esc[2:6]), 16, 32)
		if esc[6] != '_' || err != nil {
			out = append(out, b[i])
			b = b[i+1:]
			continue
		}
		out = utf8.AppendRune(out, rune(n))
		b = b[i+7:]
	}
	t.buf = out
	if !t.cut {
		t.runes = utf8.RuneCount(out)
	}
}

// readSharedStrings reads the table of texts. The text of an entry is that
// of its <t> elements, plain or in rich-text runs; phonetic guides (<rPh>)
// are not part of it.
func (b *xlsxFile) readSharedStrings(f *zip.File) error {
	sst := &b.sst
	// The arena holds at most the part's text and at most MaxTextBytes:
	// taken at once, not grown by appends (which would allocate five times
	// an 8 MiB table on the way).
	sst.arena = make([]byte, 0, min(f.UncompressedSize64, uint64(b.opts.MaxTextBytes)))
	tb := boundedText{max: b.opts.MaxCellBytes}
	// shape puts every element where SpreadsheetML allows it (a string
	// inside a string, a text inside a phonetic guide's properties, is
	// damage); inT: the innermost element is an entry's text or a run's,
	// not a phonetic guide's.
	var shape xmlShape
	inT := false
	err := b.walk(f, nsMain, func(t *xmlToken) error {
		switch t.kind {
		case xmlStart:
			k, err := shape.start(t.local)
			if err != nil {
				return b.mce.s.fail("%v", err)
			}
			switch k {
			case elSI:
				tb.reset()
			case elT:
				_, parent := shape.top()
				inT = parent == elSI || parent == elRun
			}
		case xmlEnd:
			k, _ := shape.top()
			shape.end()
			switch k {
			case elSI:
				if len(sst.ends) == maxSharedStrings {
					return fileErr(CodeTooLarge, "the file's shared strings hold more than %s entries, far more than a product list needs; save it again from Excel as .xlsx, or as CSV", group(maxSharedStrings)).withParams("kind", "content")
				}
				tb.unescape()
				// The table's text is bounded like the cells': its
				// entries are kept whether a cell shows them or not.
				if int64(len(sst.arena)+len(tb.buf)) > b.opts.MaxTextBytes {
					return fileErr(CodeTooLarge, "the file's shared strings hold more than %s of text; a product list of a few hundred rows is far smaller, so the file was refused", byteSize(b.opts.MaxTextBytes)).withParams("kind", "content")
				}
				sst.arena = append(sst.arena, tb.buf...)
				sst.ends = append(sst.ends, uint32(len(sst.arena)))
				sst.runes = append(sst.runes, int32(min(tb.runes, math.MaxInt32)))
				sst.cut = append(sst.cut, tb.cut)
			case elT:
				inT = false
			}
		case xmlText:
			if inT {
				tb.write(t.text)
			}
		}
		return nil
	})
	return err
}

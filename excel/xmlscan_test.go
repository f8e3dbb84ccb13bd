package excel

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// scanAll reads a document with xmlScanner and writes its elements, attributes
// and text (adjacent text merged, text outside the root left out) as lines.
func scanAll(r io.Reader) ([]string, error) {
	s := newXMLScanner(context.Background(), r, nil)
	var out []string
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			out = append(out, "text "+text.String())
			text.Reset()
		}
	}
	for {
		tok, err := s.next()
		if errors.Is(err, errXMLEnd) {
			flush()
			return out, nil
		}
		if err != nil {
			return out, err
		}
		switch tok.kind {
		case xmlStart:
			flush()
			line := "start " + nsName(string(tok.uri), string(tok.local))
			for _, a := range tok.attrs {
				line += " " + nsName(string(a.uri), string(a.local)) + "=" + string(a.value)
			}
			out = append(out, line)
		case xmlEnd:
			flush()
			out = append(out, "end "+string(tok.local))
		case xmlText:
			text.Write(tok.text)
		}
	}
}

// nsName writes a name with its namespace, if any: "{u}row".
func nsName(space, local string) string {
	if space == "" {
		return local
	}
	return "{" + space + "}" + local
}

// decodeAll is scanAll with encoding/xml in its strict mode.
func decodeAll(data []byte) ([]string, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	d.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	var out []string
	var text strings.Builder
	depth := 0
	flush := func() {
		if text.Len() > 0 {
			out = append(out, "text "+text.String())
			text.Reset()
		}
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			flush()
			return out, nil
		}
		if err != nil {
			return out, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			flush()
			depth++
			line := "start " + nsName(t.Name.Space, t.Name.Local)
			for _, a := range t.Attr {
				space := a.Name.Space
				if space == "xmlns" {
					space = "" // a declaration, as the scanner leaves it
				}
				line += " " + nsName(space, a.Name.Local) + "=" + a.Value
			}
			out = append(out, line)
		case xml.EndElement:
			flush()
			depth--
			out = append(out, "end "+t.Name.Local)
		case xml.CharData:
			if depth > 0 {
				text.Write(t)
			}
		}
	}
}

func TestXMLScanner(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
		err       string // part of the error; "" = accepted
	}{
		{"cell", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\r\n" + `<x:c r="A1" t='s' xmlns:x="u"><v>1</v><is/></x:c>`,
			[]string{"start {u}c r=A1 t=s x=u", "start v", "text 1", "end v", "start is", "end is", "end c"}, ""},
		{"namespaces", `<a xmlns="m" xmlns:p="q" p:b="1" c="2"><p:d xmlns:p="r" p:e="3"/><f xmlns=""/><g xml:space="preserve"/></a>`,
			[]string{"start {m}a xmlns=m p=q {q}b=1 c=2", "start {r}d p=r {r}e=3", "end d", "start f xmlns=", "end f", "start {m}g {" + uriXML + "}space=preserve", "end g", "end a"}, ""},
		{"undeclared element prefix", `<p:a/>`, nil, "prefix p of <p:a> is not declared"},
		{"undeclared attribute prefix", `<a xmlns:p="u"><b q:c="1"/></a>`, nil, "prefix q of <b> is not declared"},
		{"prefix out of scope", `<a><b xmlns:p="u"/><p:c/></a>`, nil, "not declared"},
		{"prefix bound to nothing", `<a xmlns:p=""/>`, nil, "binds the prefix p to no namespace"},
		{"xmlns declared", `<a xmlns:xmlns="u"/>`, nil, "reserved prefix"},
		{"too many namespaces", "<a" + manyDecls(200) + "><b" + manyDecls(maxNSInScope-199) + "/></a>", nil, "past 256 declarations"},
		{"entities and line ends", "<t a=\"&lt;&#x41;&#66;\r\n\">a&amp;b&quot;&apos;&gt;\r\nc\rd<![CDATA[<x>&amp;\r\n]]></t>",
			[]string{"start t a=<AB\n", "text a&b\"'>\nc\nd<x>&amp;\n", "end t"}, ""},
		{"comment", `<a><!-- a - b --><b/></a><!-- after -->`, []string{"start a", "start b", "end b", "end a"}, ""},
		{"cut off", `<a><b>x</b>`, nil, "cut off at line 1"},
		{"empty", ``, nil, "cut off"},
		{"only a declaration", `<?xml version="1.0"?>`, nil, "cut off"},
		{"mismatched", `<a></b>`, nil, "element <a> closed by </b>"},
		{"unknown entity", `<a>&nbsp;</a>`, nil, "entity"},
		{"entity without semicolon", `<a>&amp</a>`, nil, "entity"},
		{"null character reference", `<a>&#0;</a>`, nil, "entity"},
		{"control character", "<a>\x01</a>", nil, "control character"},
		{"not UTF-8", "<a>\xff</a>", nil, "not UTF-8"},
		{"doctype", `<!DOCTYPE a [<!ENTITY x "y">]><a/>`, nil, "DOCTYPE"},
		{"two roots", `<a/><b/>`, nil, "second root"},
		{"text outside", `<a/>x`, nil, "outside the root"},
		{"unquoted attribute", `<a b=1/>`, nil, "unquoted"},
		{"attribute without value", `<a b/>`, nil, "no value"},
		{"duplicate attribute", `<a b="1" b="2"/>`, nil, "twice"},
		{"lt in attribute", `<a b="<"/>`, nil, "'<'"},
		{"double colon name", `<a:b:c/>`, nil, "valid name"},
		{"dash dash in comment", `<a><!-- a -- b --></a>`, nil, `"--"`},
		{"cdata end in text", `<a>]]></a>`, nil, "]]>"},
		{"line number", "<a>\n\n<b></a>", nil, "line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time too: every chunk boundary falls everywhere once.
			for _, r := range []io.Reader{strings.NewReader(tc.doc), iotest.OneByteReader(strings.NewReader(tc.doc))} {
				got, err := scanAll(r)
				if tc.err != "" {
					if err == nil || !strings.Contains(err.Error(), tc.err) {
						t.Fatalf("error %v, want one containing %q", err, tc.err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(got, "|") != strings.Join(tc.want, "|") {
					t.Fatalf("got  %q\nwant %q", got, tc.want)
				}
			}
		})
	}
}

func manyDecls(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(" xmlns:p" + strconv.Itoa(i) + `="u"`)
	}
	return b.String()
}

// A name looked up past hundreds of declarations costs the budget for the
// declarations it passes: a part of such names is refused by the budget.
func TestNamespaceLookupsCountAgainstTheBudget(t *testing.T) {
	doc := "<p0:a" + manyDecls(200) + "><b" + strings.ReplaceAll(manyDecls(55), "xmlns:p", "xmlns:q") + ">" + strings.Repeat("<p0:x/>", 1000) + "</b></p0:a>"
	read := func(limit int) error {
		s := newXMLScanner(context.Background(), strings.NewReader(doc), &xmlBudget{limit: limit})
		for {
			if _, err := s.next(); err != nil {
				if errors.Is(err, errXMLEnd) {
					return nil
				}
				return err
			}
		}
	}
	// 1,258 entries, and 1,001 look-ups passing 254 declarations each.
	if err := read(20_000); err != nil {
		t.Fatalf("within the budget: %v", err)
	}
	if err := read(10_000); err == nil || !strings.Contains(err.Error(), "more than 10,000 XML entries") {
		t.Fatalf("past the budget: %v", err)
	}
}

// A text longer than one chunk arrives whole, across chunks, with an entity
// and a multi-byte character cut at every boundary on the way.
func TestXMLScannerLongText(t *testing.T) {
	unit := "가&amp;\r\nb"
	doc := "<a>" + strings.Repeat(unit, 20000) + "</a>"
	got, err := scanAll(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("가&\nb", 20000)
	if len(got) != 3 || got[1] != "text "+want {
		t.Fatalf("text of %d bytes, want %d", len(got[1])-5, len(want))
	}
}

// FuzzXMLScanner: a document the scanner accepts, encoding/xml accepts too,
// with the same elements, attributes and text.
func FuzzXMLScanner(f *testing.F) {
	for _, s := range []string{
		`<a b="1"><c>x&amp;y</c><![CDATA[z]]></a>`,
		"<?xml version=\"1.0\"?>\r\n<w:worksheet xmlns:w=\"u\"><w:sheetData><w:row r=\"1\"><w:c r=\"A1\" t=\"inlineStr\"><w:is><w:t xml:space=\"preserve\"> a\r\nb </w:t></w:is></w:c></w:row></w:sheetData></w:worksheet>",
		`<a><!-- c --><?pi x?></a>`,
		`<a xmlns="m" xmlns:p="q" p:b="1"><p:d xmlns:p="r" p:e="3"/><f xmlns=""/><g xml:space="preserve"/></a>`,
		`<x:worksheet xmlns:x="` + uriMain + `" xmlns:mc="` + uriMC + `" mc:Ignorable="h" xmlns:h="h"><h:row/><mc:AlternateContent><mc:Choice Requires="x"/></mc:AlternateContent></x:worksheet>`,
		`<a>&#x10FFFF;&#65;</a>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := scanAll(bytes.NewReader(doc))
		if err != nil {
			return
		}
		want, err := decodeAll(doc)
		if err != nil {
			t.Fatalf("the scanner accepted what encoding/xml refuses (%v): %q", err, doc)
		}
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("%q:\nscanner    %q\nencoding/xml %q", doc, got, want)
		}
		// Read a byte at a time, the answer is the same.
		again, err := scanAll(iotest.OneByteReader(bytes.NewReader(doc)))
		if err != nil || strings.Join(again, "\x00") != strings.Join(got, "\x00") {
			t.Fatalf("%q read a byte at a time: %v %q", doc, err, again)
		}
	})
}

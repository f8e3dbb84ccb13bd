// Package excel reads a seller's product spreadsheet (.xlsx, or CSV and the
// other text exports of a spreadsheet) into validated rows, and writes the
// two spreadsheets a seller gets back: the upload template and the per-row
// result report.
//
// Reading is defensive because the file comes from outside, and happens once:
// the upload is read into memory once (its size capped first), its type is
// told by its content, not its name (a zip is an .xlsx, the OLE signature an
// old .xls, text a CSV), and it is parsed once, by this package's own
// streaming reader. For an .xlsx, only the parts a product list needs are
// unpacked (the relationships, the workbook, its styles and shared strings,
// the sheets up to the one read), each once, under a size limit (zip bombs
// are refused by their declared sizes before anything is unpacked, a zip
// directory too large by its end record and headers before it is read, and a
// part that unpacks past its declared size fails); only elements of
// SpreadsheetML's namespace are data, with Markup Compatibility applied as
// Excel and LibreOffice apply it (xmlmce.go, docs/reading-workbooks.md), and
// header cells are cut to MaxHeaderChars where they are read; every part
// read is checked to its last byte (a cut-off sheet is refused, not read
// half), and the
// worksheet is read in one pass that keeps at most MaxCellBytes of each cell
// and MaxTextBytes of cell text in all, so a cell pointing at a huge shared
// string, or a thousand cells pointing at the same one, cost no more than
// that. Every entry of the parts read counts against a budget, empty or not
// (MaxXMLEntries in all; shared strings, styles, relationships, sheets,
// attributes of an element, parts of the zip each have their own), and every
// step is linear in its input. The problems and warnings a file gets are
// bounded in number and length (bounds.go), so what an upload answers and
// keeps is too. Together these are the cost ceiling of an upload of up to
// 10 MiB: 1 s of CPU, 64 MiB of RSS, 8 MiB in Redis, 1 MiB of answer,
// checked on the hostile corpus (testdata/hostile, go run ./bench/hostile).
// The parse runs under recover(), a time limit, its caller's context
// (checked every 1,024 XML tokens and 256 text rows, so it stops when its
// request ends) and a cap on parses at once, in the caller's goroutine: its
// slot comes back when Parse returns. excelize is used only to write the
// template and the report (and to turn a day number into the date Excel
// shows).
//
// The field rules (required, type, range, length, format) are those of the
// registration API, from package productrules: a value is refused here
// exactly when the API would refuse it, and the message names the cell.
// What this package adds is help a spreadsheet needs, each tested:
//   - The header row is the first of the first 10 rows that names at least two
//     known columns (Korean or English, see Columns). A missing required
//     column refuses the file; unknown columns are warnings. Columns after
//     the 256th are not read.
//   - Blank rows are skipped. A hidden row is registered like any other row,
//     with a warning, because hiding is a view setting, not a deletion.
//   - A cell merged down several rows of one column gives its value to every
//     row it covers (that is what the seller sees on screen), with a warning.
//     A merge across two known columns, from the header into the data, or
//     overlapping an earlier merge is one error, on the first row it covers,
//     naming its range; each other row it covers points at it.
//   - A formula cell uses the result Excel saved with it; a formula without a
//     saved result (files written by scripts) is an error naming the cell.
//   - Numbers stored as text are numbers ("12000"); "12,000" is accepted when
//     the commas group thousands correctly; "12,000원" is an error that says
//     to drop the unit.
//   - A date, a logical value or an Excel error in any column is an error:
//     it is not what the seller typed (a date is often a code Excel turned
//     into a day). A code Excel shortened to "8.80123E+12" is an error too.
//     These describe the cell, not the value: they are the only refusals the
//     API's rules do not make, because the text the API would get is not the
//     seller's.
//   - A seller_sku used twice: the first row is kept, later rows are errors
//     naming the first row.
//   - More than MaxRows data rows refuses the whole file with the count;
//     counting stops at 10 × MaxRows ("more than 5,000") so a crafted sheet
//     of a million rows is refused without reading it to the end.
//   - Text a spreadsheet could run as a formula is written to reports as it
//     is, in a cell with Excel's quote-prefix style (shown and kept as text,
//     never run), so a report of the failed rows can be uploaded again as it
//     is. A leading apostrophe from older reports is still taken off.
//
// Costs (BenchmarkParse500 and the tests that build hostile files measure
// them): the 500-row fixture parses and validates in milliseconds and
// under 2 MB allocated; a 6 MB file of 577,000 tiny rows is refused in
// milliseconds because counting stops; 4,500 cells showing one 1 MiB
// shared string are refused without expanding it.
//
// A CSV file is UTF-8, with or without a byte-order mark, UTF-16 after a
// byte-order mark (Excel's "Unicode text"), or CP949 (EUC-KR), which Korean
// Excel writes for "CSV (쉼표로 분리)": a file that is not valid UTF-8 is
// decoded as CP949, and refused when that fails too. Its fields are separated
// by commas, or by the tabs or semicolons that split its header row out (Excel
// writes tabs for its text formats, semicolons for CSV in much of Europe).
// Its records are rows as Excel numbers them (a blank line is a row), so
// cells are named as in the .xlsx (D17), and the same header names, rules and
// limits apply.
package excel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/productrules"
)

// Options bound the work one Parse may do. The zero value of a field means its default.
type Options struct {
	// MaxFileSize is the largest upload accepted, in bytes. Default 10 MiB.
	MaxFileSize int64
	// MaxRows is the most data rows a file may hold; more refuses the file. Default bulkreg.MaxRows (500).
	MaxRows int
	// UnzipSizeLimit caps the sum of the unpacked sizes of every part of an
	// .xlsx, in bytes: a zip bomb of a few KB that unpacks to gigabytes is
	// refused before anything is unpacked. Default 64 MiB.
	UnzipSizeLimit int64
	// MaxCellBytes is the most text kept of one cell, in bytes; the rest is
	// counted (its length is reported) but not kept. It is above the longest
	// value any field accepts (description: 10,000 characters, at most 40,000
	// bytes), so it never changes whether a row is valid. Default 64 KiB.
	MaxCellBytes int
	// MaxTextBytes is the most cell text one upload may expand to, in bytes,
	// counted as each cell is read: more refuses the file (too_large). A
	// shared string is counted again for every cell that shows it, so 500
	// cells pointing at one long string cannot make gigabytes of rows.
	// Default 8 MiB: 500 rows of 16 KiB each.
	MaxTextBytes int64
	// MaxXMLEntries caps the XML entries (elements, attributes, chunks of
	// text, comments) of all the parts of an .xlsx that are read, empty or
	// not: more refuses the file (too_large). The 500-row fixture holds
	// 27,109; a sheet of 500 rows × 256 columns about 650,000.
	// Default 4,000,000 (well within the upload's 1 s of CPU).
	MaxXMLEntries int
	// ParseTimeout bounds waiting for a parse slot plus the parse itself. Default 20s.
	ParseTimeout time.Duration
	// MaxConcurrent is the number of parses running at once in this Parser;
	// more wait (within ParseTimeout). Default 4.
	MaxConcurrent int
}

// Defaults.
const (
	DefaultMaxFileSize    = 10 << 20
	DefaultUnzipSizeLimit = 64 << 20
	DefaultMaxCellBytes   = 64 << 10
	DefaultMaxTextBytes   = 8 << 20
	DefaultMaxXMLEntries  = 4_000_000
	DefaultParseTimeout   = 20 * time.Second
	DefaultMaxConcurrent  = 4
	// HeaderSearchRows is how many rows from the top are searched for the header row.
	HeaderSearchRows = 10
	// MaxColumns is how many columns from the left are read.
	MaxColumns = 256
)

func (o Options) withDefaults() Options {
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = DefaultMaxFileSize
	}
	if o.MaxRows <= 0 {
		o.MaxRows = bulkreg.MaxRows
	}
	if o.UnzipSizeLimit <= 0 {
		o.UnzipSizeLimit = DefaultUnzipSizeLimit
	}
	if o.MaxCellBytes <= 0 {
		o.MaxCellBytes = DefaultMaxCellBytes
	}
	if o.MaxTextBytes <= 0 {
		o.MaxTextBytes = DefaultMaxTextBytes
	}
	if o.MaxXMLEntries <= 0 {
		o.MaxXMLEntries = DefaultMaxXMLEntries
	}
	if o.ParseTimeout <= 0 {
		o.ParseTimeout = DefaultParseTimeout
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	return o
}

// Parser reads uploads. It is safe for concurrent use; create one per process
// so MaxConcurrent holds across all requests.
type Parser struct {
	opts  Options
	slots chan struct{}
	// beforeParse, when set (tests only), runs first in the parse, with its context.
	beforeParse func(ctx context.Context)
}

// NewParser returns a Parser with o's zero fields set to their defaults.
func NewParser(o Options) *Parser {
	o = o.withDefaults()
	return &Parser{opts: o, slots: make(chan struct{}, o.MaxConcurrent)}
}

// Options returns the options in effect, defaults filled in.
func (p *Parser) Options() Options { return p.opts }

// Sheet is what Parse read from an upload.
type Sheet struct {
	Format    string   // FormatXLSX or FormatCSV: what the file was, by its content
	SheetName string   // the worksheet the rows came from; empty for a CSV file
	HeaderRow int      // spreadsheet row number of the header row
	Header    []string // the header cells as the seller wrote them, trimmed
	Rows      []Row    // every non-blank data row, valid or not, in sheet order
	Warnings  []Problem
}

// File formats.
const (
	FormatXLSX = "xlsx"
	FormatCSV  = "csv"
)

// Valid returns the number of rows without problems.
func (s *Sheet) Valid() int {
	n := 0
	for _, r := range s.Rows {
		if r.Valid() {
			n++
		}
	}
	return n
}

// Row is one data row.
type Row struct {
	Number   int             // spreadsheet row, as Excel shows it
	Product  bulkreg.Product // meaningful only when Valid()
	Cells    []string        // the raw cell texts, aligned with Sheet.Header
	Problems []Problem
	// typed says, for a row the validator built, which text fields it
	// brought to NFC from another form (textFieldBit), so AsTyped need not
	// normalise again.
	typed textForms
}

// textForms records which of a row's text fields NFC changed.
type textForms struct {
	known   bool   // the validator built the row
	changed uint16 // by textFieldBit
}

// Valid reports whether the row can be registered.
func (r Row) Valid() bool { return len(r.Problems) == 0 }

// Problem is one thing wrong (or, in Sheet.Warnings, worth knowing) about a cell or row.
type Problem struct {
	Row     int    // spreadsheet row; 0 when it concerns the whole file
	Column  string // the field, e.g. "price"; empty when it concerns the whole row
	Cell    string // e.g. "D17"; empty when it concerns the whole row
	Code    string // machine-readable, e.g. "not_whole_number"
	Message string // a sentence for the seller, without the cell
	// Params are the facts of Message ("field", "value", "min", "max",
	// "row", "range", ... and "kind" for a variant of Code), from which the
	// message table (package messages) says the problem in the seller's
	// language. Message stays the English sentence.
	Params map[string]string
}

// Error returns the problem as the seller reads it: `D17: price must be ...`.
func (p Problem) Error() string {
	switch {
	case p.Cell != "":
		return p.Cell + ": " + p.Message
	case p.Row > 0:
		return "row " + strconv.Itoa(p.Row) + ": " + p.Message
	}
	return p.Message
}

// FileError refuses a whole file. Every error Parse returns is a *FileError.
type FileError struct {
	Code     string // "too_large", "not_xlsx" (neither an .xlsx nor a CSV file), "damaged", "no_header", "missing_column", "duplicate_column", "too_many_rows", "no_rows", "timeout", "canceled"
	Message  string
	Problems []Problem // per-column details, e.g. each missing column
	// Params are the facts of Message for the message table (package
	// messages), with "kind" naming a variant ("pdf", "xls", "content").
	Params map[string]string
	Err    error // the cause, when there is one (errors.Is(err, context.Canceled) works)
}

func (e *FileError) Error() string { return e.Message }

func (e *FileError) Unwrap() error { return e.Err }

// File error codes.
const (
	CodeTooLarge        = "too_large"
	CodeNotXLSX         = "not_xlsx"
	CodeDamaged         = "damaged"
	CodeNoHeader        = "no_header"
	CodeMissingColumn   = "missing_column"
	CodeDuplicateColumn = "duplicate_column"
	CodeTooManyRows     = "too_many_rows"
	CodeNoRows          = "no_rows"
	CodeTimeout         = "timeout"
	CodeCanceled        = "canceled"
)

func fileErr(code, format string, args ...any) *FileError {
	return &FileError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// withParams adds the message table's parameters, as name, value pairs.
func (e *FileError) withParams(kv ...string) *FileError {
	e.Params = pairs(kv...)
	return e
}

// pairs makes a parameter map of name, value pairs.
func pairs(kv ...string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// Parse reads and validates one upload. The error, always a *FileError,
// means the whole file is refused and nothing in it may be registered;
// otherwise each Row says whether it is valid.
func (p *Parser) Parse(ctx context.Context, r io.Reader) (*Sheet, error) {
	// Read the body before taking a slot so a slow uploader does not hold one.
	data, err := readAtMost(r, p.opts.MaxFileSize+1)
	if err != nil {
		return nil, &FileError{Code: CodeDamaged, Message: fmt.Sprintf("the file could not be received: %v", err), Err: err}
	}
	if int64(len(data)) > p.opts.MaxFileSize {
		return nil, fileErr(CodeTooLarge, "the file is larger than %s; split it into files of at most %d rows", byteSize(p.opts.MaxFileSize), p.opts.MaxRows).
			withParams("size", byteSize(p.opts.MaxFileSize), "rows", strconv.Itoa(p.opts.MaxRows))
	}
	return p.ParseBytes(ctx, data)
}

// ParseBytes is Parse for a file already in memory. data must not change until it returns.
func (p *Parser) ParseBytes(ctx context.Context, data []byte) (sheet *Sheet, err error) {
	if int64(len(data)) > p.opts.MaxFileSize {
		return nil, fileErr(CodeTooLarge, "the file is larger than %s; split it into files of at most %d rows", byteSize(p.opts.MaxFileSize), p.opts.MaxRows).
			withParams("size", byteSize(p.opts.MaxFileSize), "rows", strconv.Itoa(p.opts.MaxRows))
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.ParseTimeout)
	defer cancel()
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxErr(ctx, "waiting for a free parser")
	}
	// The parse runs in the caller's goroutine and every loop of the readers
	// checks ctx, so a parse whose request ended or ran out of time stops
	// within milliseconds and its slot comes back when Parse returns, never
	// later. (In a goroutine of its own it would go on after Parse gave up
	// and keep the slot: one crafted file could hold one of four slots long
	// after its request had been answered.)
	defer func() { <-p.slots }()
	defer func() {
		if v := recover(); v != nil {
			sheet, err = nil, &FileError{Code: CodeDamaged,
				Message: "the file could not be read; open it in Excel and save it again as .xlsx",
				Err:     fmt.Errorf("excel: panic while parsing: %v\n%s", v, debug.Stack())}
		}
	}()
	if p.beforeParse != nil {
		p.beforeParse(ctx)
	}
	sheet, err = p.parse(ctx, data)
	if ctx.Err() != nil {
		// Whatever step noticed the end (or none, at the last moment), the
		// request has ended: the answer says why.
		return nil, ctxErr(ctx, "reading the file")
	}
	if err != nil {
		return nil, err
	}
	return sheet, nil
}

// readAtMost reads r to its end or to limit bytes. A reader that knows its
// length (bytes.Reader, strings.Reader) is read into one buffer of that
// size: io.ReadAll doubles its buffer as it goes, and held twice a 10 MiB
// upload's bytes for a moment.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	lr := io.LimitReader(r, limit)
	l, ok := r.(interface{ Len() int })
	if !ok {
		return io.ReadAll(lr)
	}
	buf := make([]byte, min(int64(l.Len()), limit))
	n, err := io.ReadFull(lr, buf)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return buf[:n], nil
	case err != nil:
		return nil, err
	}
	// Whatever follows (only when the reader holds more than it said, or
	// past the limit, which refuses the file anyway).
	rest, err := io.ReadAll(lr)
	return append(buf, rest...), err
}

func ctxErr(ctx context.Context, doing string) *FileError {
	err := context.Cause(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return &FileError{Code: CodeTimeout, Message: "the file took too long to read (" + doing + "); try again, or split it into smaller files", Err: err}
	}
	return &FileError{Code: CodeCanceled, Message: "reading the file was cancelled", Err: err}
}

var (
	zipMagic = []byte("PK\x03\x04")
	oleMagic = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}
)

// parse tells the file's type by its content, never its name: sellers rename
// files, and a CSV saved as "products.xlsx" is still a CSV.
func (p *Parser) parse(ctx context.Context, data []byte) (*Sheet, error) {
	switch {
	case len(data) == 0:
		return nil, fileErr(CodeNotXLSX, "the file is empty").withParams("kind", "empty")
	case bytes.HasPrefix(data, zipMagic):
		return p.readXLSX(ctx, data)
	case bytes.HasPrefix(data, oleMagic):
		if ferr := oleDocument(data); ferr != nil {
			return nil, ferr
		}
		return nil, fileErr(CodeNotXLSX, "the file is an old-style .xls workbook or is protected by a password; save it as \"Excel Workbook (.xlsx)\" without a password").withParams("kind", "xls")
	}
	if ferr := sniffDocument(data); ferr != nil {
		return nil, ferr
	}
	return p.readCSV(ctx, data)
}

// byteSize formats a byte count for a seller: "10 MiB", "350 KB".
func byteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// quote shows a cell value in a message, shortened so a 1 MB cell does not
// make a 1 MB message.
func quote(s string) string { return productrules.Quote(s) }

// shorten is quote without the quotes.
func shorten(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// joinAnd joins names as "a, b and c".
func joinAnd(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// Package excel reads a seller's product spreadsheet (.xlsx) into validated
// rows, and writes the two spreadsheets a seller gets back: the upload
// template and the per-row result report.
//
// Reading is defensive because the file comes from outside: the file size is
// capped before anything is unpacked, every part of the zip is unpacked once
// under a size limit and every worksheet's XML is checked to the last byte
// (excelize's streaming reader stops silently at broken XML, which would
// register half a file), and excelize itself runs under recover(), a time
// limit and a cap on parses at once.
//
// Decisions a seller can notice, each tested:
//   - The header row is the first of the first 10 rows that names at least two
//     known columns (Korean or English, see Columns). A missing required
//     column refuses the file; unknown columns are warnings.
//   - Blank rows are skipped. A hidden row is registered like any other row,
//     with a warning, because hiding is a view setting, not a deletion.
//   - A cell merged down several rows of one column gives its value to every
//     row it covers (that is what the seller sees on screen), with a warning.
//     A merge across two known columns, or from the header into the data, is
//     an error on each row it covers.
//   - A formula cell uses the result Excel saved with it; a formula without a
//     saved result (files written by scripts) is an error naming the cell.
//   - Numbers stored as text are numbers ("12000"); "12,000" is accepted when
//     the commas group thousands correctly; "12,000원" is an error.
//   - A date in any column is an error: Excel has turned what the seller typed
//     (often a code) into a day number.
//   - A seller_sku used twice: the first row is kept, later rows are errors
//     naming the first row.
//   - More than MaxRows data rows refuses the whole file with the count;
//     counting stops at 10 × MaxRows ("more than 5,000") so a crafted sheet
//     of a million rows is refused without reading it to the end.
//   - Text a spreadsheet could run as a formula is written to reports with a
//     leading apostrophe, which the parser removes again, so a report of the
//     failed rows can be uploaded again as it is.
//
// Costs, measured on 2 busy cores: the 500-row fixture parses in about 40 ms
// (10 MB allocated); a crafted 6 MB file whose sheet unpacks to 60 MiB of
// 577,000 tiny rows is refused in about 0.2 s (26 MiB allocated) because
// counting stops; a sheet of that many blank or formula-only rows is still
// walked by excelize (about 1 s), which is why parses are capped
// (MaxConcurrent) and timed (ParseTimeout).
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

	"github.com/bulkreg/bulkreg"
)

// Options bound the work one Parse may do. The zero value of a field means its default.
type Options struct {
	// MaxFileSize is the largest upload accepted, in bytes. Default 10 MiB.
	MaxFileSize int64
	// MaxRows is the most data rows a file may hold; more refuses the file. Default bulkreg.MaxRows (500).
	MaxRows int
	// UnzipSizeLimit caps the sum of the unpacked sizes of every part of the
	// file, in bytes: a zip bomb of a few KB that unpacks to gigabytes is
	// refused before anything is unpacked. Default 64 MiB.
	UnzipSizeLimit int64
	// UnzipXMLSizeLimit is the size above which excelize keeps a worksheet on
	// disk instead of in memory, in bytes. Default 16 MiB; at most UnzipSizeLimit.
	UnzipXMLSizeLimit int64
	// ParseTimeout bounds waiting for a parse slot plus the parse itself. Default 20s.
	ParseTimeout time.Duration
	// MaxConcurrent is the number of parses running at once in this Parser;
	// more wait (within ParseTimeout). Default 4.
	MaxConcurrent int
}

// Defaults.
const (
	DefaultMaxFileSize       = 10 << 20
	DefaultUnzipSizeLimit    = 64 << 20
	DefaultUnzipXMLSizeLimit = 16 << 20
	DefaultParseTimeout      = 20 * time.Second
	DefaultMaxConcurrent     = 4
	// HeaderSearchRows is how many rows from the top are searched for the header row.
	HeaderSearchRows = 10
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
	if o.UnzipXMLSizeLimit <= 0 {
		o.UnzipXMLSizeLimit = min(int64(DefaultUnzipXMLSizeLimit), o.UnzipSizeLimit)
	}
	if o.UnzipXMLSizeLimit > o.UnzipSizeLimit {
		o.UnzipXMLSizeLimit = o.UnzipSizeLimit
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
	// beforeParse, when set (tests only), runs in the parse goroutine first.
	beforeParse func()
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
	SheetName string   // the worksheet the rows came from
	HeaderRow int      // spreadsheet row number of the header row
	Header    []string // the header cells as the seller wrote them, trimmed
	Rows      []Row    // every non-blank data row, valid or not, in sheet order
	Warnings  []Problem
}

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
	Code     string // "too_large", "not_xlsx", "damaged", "no_header", "missing_column", "duplicate_column", "too_many_rows", "no_rows", "timeout", "canceled"
	Message  string
	Problems []Problem // per-column details, e.g. each missing column
	Err      error     // the cause, when there is one (errors.Is(err, context.Canceled) works)
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

// Parse reads and validates one upload. The error, always a *FileError,
// means the whole file is refused and nothing in it may be registered;
// otherwise each Row says whether it is valid.
func (p *Parser) Parse(ctx context.Context, r io.Reader) (*Sheet, error) {
	// Read the body before taking a slot so a slow uploader does not hold one.
	data, err := io.ReadAll(io.LimitReader(r, p.opts.MaxFileSize+1))
	if err != nil {
		return nil, &FileError{Code: CodeDamaged, Message: fmt.Sprintf("the file could not be received: %v", err), Err: err}
	}
	if int64(len(data)) > p.opts.MaxFileSize {
		return nil, fileErr(CodeTooLarge, "the file is larger than %s; split it into files of at most %d rows", byteSize(p.opts.MaxFileSize), p.opts.MaxRows)
	}
	return p.ParseBytes(ctx, data)
}

// ParseBytes is Parse for a file already in memory. data must not change until it returns.
func (p *Parser) ParseBytes(ctx context.Context, data []byte) (*Sheet, error) {
	if int64(len(data)) > p.opts.MaxFileSize {
		return nil, fileErr(CodeTooLarge, "the file is larger than %s; split it into files of at most %d rows", byteSize(p.opts.MaxFileSize), p.opts.MaxRows)
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.ParseTimeout)
	defer cancel()
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxErr(ctx, "waiting for a free parser")
	}
	type result struct {
		sheet *Sheet
		err   error
	}
	done := make(chan result, 1)
	go func() {
		// The slot is given back when the parse really ends, not when Parse
		// gives up waiting: a runaway parse keeps counting against the cap.
		defer func() { <-p.slots }()
		defer func() {
			if v := recover(); v != nil {
				done <- result{err: &FileError{Code: CodeDamaged,
					Message: "the file could not be read; open it in Excel and save it again as .xlsx",
					Err:     fmt.Errorf("excel: panic while parsing: %v\n%s", v, debug.Stack())}}
			}
		}()
		if p.beforeParse != nil {
			p.beforeParse()
		}
		s, err := p.parse(ctx, data)
		done <- result{s, err}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			return nil, res.err
		}
		return res.sheet, nil
	case <-ctx.Done():
		return nil, ctxErr(ctx, "reading the file")
	}
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

func (p *Parser) parse(ctx context.Context, data []byte) (*Sheet, error) {
	switch {
	case len(data) == 0:
		return nil, fileErr(CodeNotXLSX, "the file is empty")
	case bytes.HasPrefix(data, oleMagic):
		return nil, fileErr(CodeNotXLSX, "the file is an old-style .xls workbook or is protected by a password; save it as \"Excel Workbook (.xlsx)\" without a password")
	case !bytes.HasPrefix(data, zipMagic):
		return nil, fileErr(CodeNotXLSX, "the file is not an Excel workbook (.xlsx); save it from Excel as \"Excel Workbook (.xlsx)\"")
	}
	pkg, ferr := checkPackage(ctx, data, p.opts.UnzipSizeLimit, p.opts.MaxRows)
	if ferr != nil {
		return nil, ferr
	}
	return p.readWorkbook(ctx, data, pkg)
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
func quote(s string) string {
	const max = 40
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

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

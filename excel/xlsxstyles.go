// The styles part and date formats: which cells show a number as a date.

package excel

import (
	"archive/zip"
	"strconv"
	"strings"

	"github.com/xuri/excelize/v2"
)

// readStyles finds the cell formats that show numbers as dates or times.
// A custom number format is judged as it is read (only whether it shows a
// date is kept); the formats of both kinds count against maxStyles.
func (b *xlsxFile) readStyles(f *zip.File) error {
	custom := map[int]bool{} // custom number format → shows a date or time
	var xfs []int            // the number format of each cell format
	inCellXfs := false
	tooMany := func() error {
		return fileErr(CodeTooLarge, "the file's styles hold more than %s formats, more than Excel allows; save it again from Excel as .xlsx", group(maxStyles)).withParams("kind", "content")
	}
	err := b.walk(f, nsMain, func(t *xmlToken) error {
		switch t.kind {
		case xmlStart:
			switch string(t.local) {
			case "numFmt":
				if len(custom) >= maxStyles {
					return tooMany()
				}
				if id, err := strconv.Atoi(string(t.attr("numFmtId"))); err == nil {
					custom[id] = isDateFormatCode(string(t.attr("formatCode")))
				}
			case "cellXfs":
				inCellXfs = true
			case "xf":
				if inCellXfs {
					if len(xfs) >= maxStyles {
						return tooMany()
					}
					id, err := strconv.Atoi(string(t.attr("numFmtId")))
					if err != nil {
						id = -1
					}
					xfs = append(xfs, id)
				}
			}
		case xmlEnd:
			if string(t.local) == "cellXfs" {
				inCellXfs = false
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.dateStyles = make([]bool, len(xfs))
	for i, id := range xfs {
		if date, ok := custom[id]; ok {
			b.dateStyles[i] = date
		} else {
			b.dateStyles[i] = isBuiltinDateFormat(id)
		}
	}
	return nil
}

// shownDate is a day number as Excel shows it with a date format.
func shownDate(raw string, date1904 bool) string {
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		return raw
	}
	t, err := excelize.ExcelDateToTime(v, date1904)
	if err != nil {
		return raw
	}
	if t.Hour() != 0 || t.Minute() != 0 || t.Second() != 0 {
		return t.Format("2006-01-02 15:04:05")
	}
	return t.Format("2006-01-02")
}

func isBuiltinDateFormat(id int) bool {
	return (id >= 14 && id <= 22) || (id >= 27 && id <= 36) || (id >= 45 && id <= 47) || (id >= 50 && id <= 58) || (id >= 71 && id <= 81)
}

// isDateFormatCode reports a custom number format that shows a date or a time:
// y, m, d, h or s outside quotes, escapes and [brackets] (except [h], [m], [s]).
func isDateFormatCode(code string) bool {
	inQuote, inBracket := false, false
	var bracket strings.Builder
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case inQuote:
			if c == '"' {
				inQuote = false
			}
		case inBracket:
			if c == ']' {
				inBracket = false
				b := strings.ToLower(bracket.String())
				if b == "h" || b == "hh" || b == "m" || b == "mm" || b == "s" || b == "ss" {
					return true
				}
			} else {
				bracket.WriteByte(c)
			}
		case c == '"':
			inQuote = true
		case c == '[':
			inBracket = true
			bracket.Reset()
		case c == '\\' || c == '_' || c == '*':
			i++
		default:
			switch c | 0x20 {
			case 'y', 'm', 'd', 'h', 's':
				return true
			case 'e':
				// "E+" is scientific notation, "e" alone is a year in some locales.
				if i+1 < len(code) && (code[i+1] == '+' || code[i+1] == '-') {
					i++
					continue
				}
				return true
			case 'g':
				// "General"
				if strings.HasPrefix(strings.ToLower(code[i:]), "general") {
					i += len("general") - 1
				}
			}
		}
	}
	return false
}

package excel

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/bulkreg/bulkreg/productrules"
)

// Category is one of the marketplace's categories: the code a product row
// names in its category column, and the name a seller looks it up by.
type Category struct {
	Code string
	Name string
}

// Bounds of a categories file: far more than a marketplace's leaf
// categories, small enough that the template stays a quick download.
const (
	MaxCategories         = 100_000
	MaxCategoryFileBytes  = 8 << 20
	maxCategoryNameLength = 200
)

// ReadCategories reads the marketplace's categories from a CSV file in
// UTF-8 (a byte-order mark is skipped): one category a line, its code and,
// after a comma, its name ("50000803,여성의류 > 티셔츠"). Lines starting
// with # and empty lines are skipped, and so is a first line naming the
// columns as a product sheet does ("카테고리코드,카테고리명",
// "category_code,name"). Every code must be a category code the
// registration API accepts and appear once; every name one line of at most
// 200 characters. An error names the line.
func ReadCategories(r io.Reader) ([]Category, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxCategoryFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("categories: %w", err)
	}
	if len(data) > MaxCategoryFileBytes {
		return nil, fmt.Errorf("categories: the file is larger than %s", byteSize(MaxCategoryFileBytes))
	}
	cr := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte("\ufeff"))))
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	rule := productrules.Must(productrules.CategoryCode)
	nameRule := productrules.Rule{Field: "name", Type: productrules.Text, MaxLen: maxCategoryNameLength, Format: productrules.Line}
	var out []Category
	lines := map[string]int{}
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return nil, fmt.Errorf("categories: %w", err)
		}
		code := strings.TrimFunc(rec[0], productrules.IsSpace)
		if first {
			if f, ok := HeaderField(code); ok && f == FieldCategoryCode {
				continue
			}
		}
		code, viol := rule.Text(code)
		if viol != nil {
			return nil, fmt.Errorf("categories: line %d: %s", line, viol.Message)
		}
		if prev, ok := lines[code]; ok {
			return nil, fmt.Errorf("categories: line %d: code %s is on line %d already", line, productrules.Quote(code), prev)
		}
		c := Category{Code: code}
		if len(rec) > 1 {
			name, viol := nameRule.Text(strings.TrimFunc(strings.Join(rec[1:], ","), productrules.IsSpace))
			if viol != nil && viol.Code != productrules.CodeRequired {
				return nil, fmt.Errorf("categories: line %d: the name of %s: %s", line, productrules.Quote(code), strings.TrimPrefix(viol.Message, "name "))
			}
			if viol == nil {
				c.Name = name
			}
		}
		if len(out) == MaxCategories {
			return nil, fmt.Errorf("categories: more than %s categories", group(MaxCategories))
		}
		lines[code] = line
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("categories: the file lists no category")
	}
	return out, nil
}

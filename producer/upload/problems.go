package upload

import (
	"errors"
	"strconv"

	"github.com/bulkreg/bulkreg/excel"
)

// Problem is an excel.Problem as JSON: what `check --json` prints per line
// and what the HTTP service answers.
type Problem struct {
	Row     int    `json:"row"`
	Column  string `json:"column"`
	Cell    string `json:"cell"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Params are the facts of Message for the message table (package
	// messages): what a Korean page says from.
	Params map[string]string `json:"params,omitempty"`
}

// String is the problem as the seller reads it: "D17: price must be ...".
func (p Problem) String() string {
	return excel.Problem{Row: p.Row, Column: p.Column, Cell: p.Cell, Code: p.Code, Message: p.Message}.Error()
}

// Problems converts excel problems for JSON.
func Problems(ps []excel.Problem) []Problem {
	if len(ps) == 0 {
		return nil
	}
	out := make([]Problem, len(ps))
	for i, p := range ps {
		out[i] = Problem{Row: p.Row, Column: p.Column, Cell: p.Cell, Code: p.Code, Message: p.Message, Params: p.Params}
	}
	return out
}

// Refusal is why a whole file or upload was refused, for callers that
// answer it (the HTTP problem document, the CLI's lines).
type Refusal struct {
	// Code: an excel file error code ("missing_column", "no_rows", ...),
	// "invalid_rows" (a strict upload with invalid rows) or "refused".
	Code     string
	Message  string
	Problems []Problem
	// Params are the facts of Message for the message table.
	Params map[string]string
}

// CodeNoRows is the refusal of a file with a header and no product rows:
// an untouched template. It is not a broken file; the seller has yet to
// fill it in.
const CodeNoRows = excel.CodeNoRows

// Refused tells whether err refuses the file or its rows, and why.
func Refused(err error) (Refusal, bool) {
	var fe *excel.FileError
	var ir *InvalidRowsError
	switch {
	case !errors.Is(err, ErrRefused):
		return Refusal{}, false
	case errors.As(err, &fe):
		return Refusal{Code: fe.Code, Message: fe.Error(), Problems: Problems(fe.Problems), Params: fe.Params}, true
	case errors.As(err, &ir):
		return Refusal{Code: "invalid_rows", Message: ir.Error(), Problems: Problems(ir.Problems), Params: map[string]string{"count": strconv.Itoa(len(ir.Problems))}}, true
	}
	return Refusal{Code: "refused", Message: err.Error()}, true
}

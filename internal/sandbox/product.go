package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/bulkreg/bulkreg/productrules"
)

// maxKeyLen bounds the Idempotency-Key; an upload id and a row number fit many times over.
const maxKeyLen = 255

// product is a registration as the API understands it. It is also the
// canonical form two requests with the same Idempotency-Key are compared in:
// the same product written with other spacing, field order, unknown fields
// or Unicode normalization form (its text is kept in NFC) is the same
// registration.
type product struct {
	SellerSKU    string `json:"seller_sku"`
	Name         string `json:"name"`
	CategoryCode string `json:"category_code"`
	Price        int64  `json:"price"`
	Stock        int64  `json:"stock"`
	Brand        string `json:"brand"`
	ImageURL     string `json:"image_url"`
	Description  string `json:"description"`
	ShippingFee  int64  `json:"shipping_fee"`
}

// apiError is the body of every refusal: {"error":{"code","message","field"}}.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// decodeProduct parses a request body. A body that is not one JSON object is
// a 400 (invalid_json); an object whose fields break a rule of the shared
// table (package productrules) is a 422 naming the first such field in the
// contract's order, with the code invalid_<field>. Numbers are read as the
// literal the client wrote, so 12.5, 1e3 and "12000" are refused instead of
// being rounded or coerced. Unknown fields are allowed, like most JSON APIs.
func decodeProduct(body []byte) (product, *apiError, int) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		return product{}, &apiError{Code: "invalid_json", Message: "the body is not a JSON object: " + err.Error()}, http.StatusBadRequest
	}
	if fields == nil { // the body was the literal null
		return product{}, &apiError{Code: "invalid_json", Message: "the body is not a JSON object: it is null"}, http.StatusBadRequest
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return product{}, &apiError{Code: "invalid_json", Message: "the body holds more than one JSON value"}, http.StatusBadRequest
	}
	var p product
	texts := map[string]*string{
		productrules.SellerSKU: &p.SellerSKU, productrules.Name: &p.Name, productrules.CategoryCode: &p.CategoryCode,
		productrules.Brand: &p.Brand, productrules.ImageURL: &p.ImageURL, productrules.Description: &p.Description,
	}
	numbers := map[string]*int64{productrules.Price: &p.Price, productrules.Stock: &p.Stock, productrules.ShippingFee: &p.ShippingFee}
	for _, rule := range productrules.Rules() {
		var v *productrules.Violation
		switch rule.Type {
		case productrules.Text:
			*texts[rule.Field], v = checkText(rule, fields[rule.Field])
		case productrules.WholeNumber:
			*numbers[rule.Field], v = checkNumber(rule, fields[rule.Field])
		}
		if v != nil {
			return product{}, &apiError{Code: "invalid_" + v.Field, Message: v.Message, Field: v.Field}, http.StatusUnprocessableEntity
		}
	}
	return p, nil, 0
}

// checkText applies a Text rule to a decoded JSON value (absent is nil) and
// answers the text in NFC, so the same product written in NFC or NFD is one
// registration (the canonical form below) and one SKU (Stats' Products).
func checkText(rule productrules.Rule, v any) (string, *productrules.Violation) {
	if v == nil {
		return "", rule.Missing()
	}
	s, ok := v.(string)
	if !ok {
		return "", rule.WrongType(jsonKind(v))
	}
	if productrules.IsBlank(s) {
		return "", rule.Missing()
	}
	s, err := rule.Text(s)
	if err != nil {
		return "", err
	}
	return s, nil
}

// checkNumber applies a WholeNumber rule to a decoded JSON value. Only an
// integer literal is a whole number: 12000.0 and 1.2e4 are refused, as
// written, rather than rounded.
func checkNumber(rule productrules.Rule, v any) (int64, *productrules.Violation) {
	if v == nil {
		if err := rule.Missing(); err != nil {
			return 0, err
		}
		return rule.Default, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, rule.WrongType(jsonKind(v))
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, rule.OutOfRange(n.String())
	}
	if err != nil {
		return 0, rule.NotWhole(n.String())
	}
	if err := rule.CheckNumber(i, n.String()); err != nil {
		return 0, err
	}
	return i, nil
}

// jsonKind names the JSON type of a decoded value, for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "true or false"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

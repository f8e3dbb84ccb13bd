package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Field limits of the registration API.
const (
	maxSKULen  = 100 // characters (runes), not bytes: names are often Korean
	maxNameLen = 200
	maxKeyLen  = 255 // Idempotency-Key; an upload id and a row number fit many times over
)

// product is a registration as the API understands it. It is also the
// canonical form two requests with the same Idempotency-Key are compared in:
// the same product written with other spacing, field order or unknown fields
// is the same registration.
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

func invalid(field, format string, args ...any) *apiError {
	return &apiError{Code: "invalid_" + field, Message: fmt.Sprintf(format, args...), Field: field}
}

// decodeProduct parses a request body. A body that is not one JSON object is
// a 400 (invalid_json); an object whose fields break a rule is a 422 naming
// the first field in the order of the contract. Numbers are read as the
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
	var e *apiError
	str := func(name string, required bool, maxLen int, dst *string) {
		if e != nil {
			return
		}
		v, ok := fields[name]
		if !ok || v == nil {
			if required {
				e = invalid(name, "%s is required", name)
			}
			return
		}
		s, ok := v.(string)
		switch {
		case !ok:
			e = invalid(name, "%s must be a string", name)
		case required && strings.TrimSpace(s) == "":
			e = invalid(name, "%s must not be empty", name)
		case maxLen > 0 && utf8.RuneCountInString(s) > maxLen:
			e = invalid(name, "%s must be at most %d characters, it has %d", name, maxLen, utf8.RuneCountInString(s))
		default:
			*dst = s
		}
	}
	whole := func(name string, required bool, min int64, dst *int64) {
		if e != nil {
			return
		}
		rule := "a whole number of 0 or more"
		if min > 0 {
			rule = "a whole number greater than 0"
		}
		v, ok := fields[name]
		if !ok || v == nil {
			if required {
				e = invalid(name, "%s is required and must be %s", name, rule)
			}
			return
		}
		n, ok := v.(json.Number)
		if !ok {
			e = invalid(name, "%s must be %s", name, rule)
			return
		}
		// ParseInt accepts exactly the JSON integer literals: no fraction,
		// no exponent. Anything else is not a whole number as written.
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil || i < min {
			e = invalid(name, "%s must be %s", name, rule)
			return
		}
		*dst = i
	}
	str("seller_sku", true, maxSKULen, &p.SellerSKU)
	str("name", true, maxNameLen, &p.Name)
	str("category_code", true, 0, &p.CategoryCode)
	whole("price", true, 1, &p.Price)
	whole("stock", true, 0, &p.Stock)
	whole("shipping_fee", false, 0, &p.ShippingFee)
	str("image_url", false, 0, &p.ImageURL)
	str("brand", false, 0, &p.Brand)
	str("description", false, 0, &p.Description)
	if e == nil && p.ImageURL != "" {
		u, err := url.Parse(p.ImageURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			e = invalid("image_url", "image_url must be an http or https URL, got %q", p.ImageURL)
		}
	}
	if e != nil {
		return product{}, e, http.StatusUnprocessableEntity
	}
	return p, nil, 0
}

// Package bulkreg holds the domain types every part of bulkreg shares: the
// product a seller registers and the Kafka message that carries one row of an
// upload from the producer to the consumers. The packages below it (excel,
// throttle, registryclient, consumer, ...) each talk to one outside system;
// this package talks to none.
package bulkreg

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bulkreg/bulkreg/internal/jsonenc"
)

// Defaults shared by every binary. They are the production values; tests and
// the demo override them through configuration.
const (
	// DefaultTopic is the rows topic. Its dead-letter topic is DLQTopic(DefaultTopic).
	DefaultTopic = "product-registrations"
	// MaxRows is the most data rows one upload may hold; a larger file is refused whole.
	MaxRows = 500
	// MessageVersion is the "v" field of every message this version writes.
	MessageVersion = 1
)

// DLQTopic names the dead-letter topic of a rows topic.
func DLQTopic(topic string) string { return topic + ".dlq" }

// Product is one row of an upload as the registration API receives it.
// Prices and fees are whole won; Stock is a count.
type Product struct {
	SellerSKU    string `json:"seller_sku"`
	Name         string `json:"name"`
	CategoryCode string `json:"category_code"`
	Price        int64  `json:"price"`
	Stock        int64  `json:"stock"`
	Brand        string `json:"brand,omitempty"`
	ImageURL     string `json:"image_url,omitempty"`
	Description  string `json:"description,omitempty"`
	ShippingFee  int64  `json:"shipping_fee"`
}

// ContentHash is a canonical hash of the product as the registration API
// receives it: the SHA-256 of its JSON body (fields in the order of Product,
// empty optional fields left out exactly as they are on the wire), cut to 128
// bits and written as 32 hex digits. The SKU ledger compares it to tell a
// re-upload of the same product from a changed one; 128 bits make a false
// "same" between two versions of one SKU practically impossible.
func (p Product) ContentHash() string {
	var buf [512]byte
	sum := sha256.Sum256(p.AppendJSON(buf[:0]))
	return hex.EncodeToString(sum[:16])
}

// AppendJSON appends the product's JSON body to dst, byte for byte what
// json.Marshal(p) writes (FuzzProductJSON holds it to that), without its
// reflection: the consumer encodes every row twice (its content hash and
// its call).
func (p Product) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"seller_sku":`...)
	dst = jsonenc.AppendString(dst, p.SellerSKU)
	dst = append(dst, `,"name":`...)
	dst = jsonenc.AppendString(dst, p.Name)
	dst = append(dst, `,"category_code":`...)
	dst = jsonenc.AppendString(dst, p.CategoryCode)
	dst = append(dst, `,"price":`...)
	dst = strconv.AppendInt(dst, p.Price, 10)
	dst = append(dst, `,"stock":`...)
	dst = strconv.AppendInt(dst, p.Stock, 10)
	if p.Brand != "" {
		dst = append(dst, `,"brand":`...)
		dst = jsonenc.AppendString(dst, p.Brand)
	}
	if p.ImageURL != "" {
		dst = append(dst, `,"image_url":`...)
		dst = jsonenc.AppendString(dst, p.ImageURL)
	}
	if p.Description != "" {
		dst = append(dst, `,"description":`...)
		dst = jsonenc.AppendString(dst, p.Description)
	}
	dst = append(dst, `,"shipping_fee":`...)
	dst = strconv.AppendInt(dst, p.ShippingFee, 10)
	return append(dst, '}')
}

// Message is the value of one Kafka message: one row of one upload. The key
// of the Kafka message is SellerID, so one seller's rows stay on one partition.
type Message struct {
	V              int       `json:"v"`
	UploadID       string    `json:"upload_id"`
	SellerID       string    `json:"seller_id"`
	Row            int       `json:"row"`
	IdempotencyKey string    `json:"idempotency_key"`
	Product        Product   `json:"product"`
	EnqueuedAt     time.Time `json:"enqueued_at"`
}

// IdempotencyKey is the key the registration API deduplicates on. It is
// derived, never chosen, so a re-sent row always carries the same key.
func IdempotencyKey(uploadID string, row int) string {
	return uploadID + ":" + strconv.Itoa(row)
}

// NewMessage builds the message for one row.
func NewMessage(uploadID, sellerID string, row int, p Product, enqueuedAt time.Time) Message {
	return Message{
		V:              MessageVersion,
		UploadID:       uploadID,
		SellerID:       sellerID,
		Row:            row,
		IdempotencyKey: IdempotencyKey(uploadID, row),
		Product:        p,
		EnqueuedAt:     enqueuedAt.UTC().Truncate(time.Second),
	}
}

// MaxSellerIDLen is the longest seller id bulkreg accepts.
const MaxSellerIDLen = 64

// ErrBadSellerID marks a seller id outside the one format bulkreg accepts.
var ErrBadSellerID = errors.New("bad seller id")

// ValidSellerID checks a seller id against the one format bulkreg accepts
// everywhere: 1 to 64 of the characters A-Z, a-z, 0-9, "_" and "-". The id
// becomes part of Redis keys, a path segment of the registration URL and a
// column of text reports, so a "..", a "/" or a line break in it would
// change what those mean; the format leaves nothing to escape.
func ValidSellerID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: it is empty", ErrBadSellerID)
	}
	if len(id) > MaxSellerIDLen {
		return fmt.Errorf("%w: it has %d characters, at most %d are allowed", ErrBadSellerID, len(id), MaxSellerIDLen)
	}
	for i, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %s holds %q at byte %d; only A-Z, a-z, 0-9, _ and - are allowed", ErrBadSellerID, quoteShort(id), c, i+1)
		}
	}
	return nil
}

// quoteShort quotes an id for an error message, cut so a huge value does not
// make a huge message.
func quoteShort(s string) string {
	if len(s) > MaxSellerIDLen {
		return strconv.Quote(s[:MaxSellerIDLen]) + "…"
	}
	return strconv.Quote(s)
}

// MaxUploadIDLen is the longest upload id bulkreg accepts.
const MaxUploadIDLen = 64

// MaxRowNumber is the highest row number a message may carry. Rows are
// numbered as the file numbers them (a sheet's row, a text file's line), and
// an upload is at most 10 MiB, so no upload has a row beyond it.
const MaxRowNumber = 1 << 24

// ErrBadUploadID marks an upload id outside the one format bulkreg accepts.
var ErrBadUploadID = errors.New("bad upload id")

// ValidUploadID checks an upload id against the format bulkreg accepts: 1 to
// 64 of the characters A-Z, a-z, 0-9, "_" and "-". The producer makes ids of
// 16 lowercase hex digits (the SHA-256 of the seller and the file's SHA-256,
// cut to 64 bits: producer/upload.UploadID), which this format holds; it is
// as wide as the seller id's so that ids made by tools (the bench, redrive
// tests) pass too. The id becomes a Redis hash tag ({<id>}), the part of the
// Idempotency-Key before its ':' and a path in status URLs, so a brace, a
// colon, a slash or a line break in it would change what those mean.
func ValidUploadID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: it is empty", ErrBadUploadID)
	}
	if len(id) > MaxUploadIDLen {
		return fmt.Errorf("%w: it has %d characters, at most %d are allowed", ErrBadUploadID, len(id), MaxUploadIDLen)
	}
	for i, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %s holds %q at byte %d; only A-Z, a-z, 0-9, _ and - are allowed", ErrBadUploadID, quoteShort(id), c, i+1)
		}
	}
	return nil
}

// ErrBadMessage marks a message that can never be processed, however often it
// is retried: it belongs in the dead-letter topic at once.
var ErrBadMessage = errors.New("bad message")

// DecodeMessage parses and checks a message value. Every error wraps
// ErrBadMessage and names the field that is wrong.
func DecodeMessage(value []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(value, &m); err != nil {
		return Message{}, fmt.Errorf("%w: value is not the JSON of a row message: %v", ErrBadMessage, err)
	}
	switch {
	case m.V != MessageVersion:
		return Message{}, fmt.Errorf("%w: field v is %d, this consumer reads version %d", ErrBadMessage, m.V, MessageVersion)
	case m.UploadID == "":
		return Message{}, fmt.Errorf("%w: field upload_id is empty", ErrBadMessage)
	case ValidUploadID(m.UploadID) != nil:
		return Message{}, fmt.Errorf("%w: field upload_id: %w", ErrBadMessage, ValidUploadID(m.UploadID))
	case m.SellerID == "":
		return Message{}, fmt.Errorf("%w: field seller_id is empty", ErrBadMessage)
	case ValidSellerID(m.SellerID) != nil:
		return Message{}, fmt.Errorf("%w: field seller_id: %w", ErrBadMessage, ValidSellerID(m.SellerID))
	case m.Row < 1:
		return Message{}, fmt.Errorf("%w: field row is %d, rows start at 1", ErrBadMessage, m.Row)
	case m.Row > MaxRowNumber:
		return Message{}, fmt.Errorf("%w: field row is %d, no upload has a row beyond %d", ErrBadMessage, m.Row, MaxRowNumber)
	case m.IdempotencyKey != IdempotencyKey(m.UploadID, m.Row):
		return Message{}, fmt.Errorf("%w: field idempotency_key is %s, want %q", ErrBadMessage, quoteShort(m.IdempotencyKey), IdempotencyKey(m.UploadID, m.Row))
	case m.EnqueuedAt.IsZero():
		return Message{}, fmt.Errorf("%w: field enqueued_at is missing; the producer stamps every row with the time it queued it", ErrBadMessage)
	case strings.TrimSpace(m.Product.SellerSKU) == "":
		// The ledger keys a registration by the SKU: a row without one can
		// never be claimed, and retrying it would stop its partition.
		return Message{}, fmt.Errorf("%w: field product.seller_sku is empty; every row names the product's SKU", ErrBadMessage)
	}
	return m, nil
}

// DecodeRecord parses a Kafka message of the rows topic: its key and its
// value. The key is the seller id (it picks the partition), and the value
// names the seller too; when they differ the message is one seller's rows
// routed as another's, or a forgery, and registering it under either seller
// would be wrong. Every error wraps ErrBadMessage.
func DecodeRecord(key, value []byte) (Message, error) {
	m, err := DecodeMessage(value)
	if err != nil {
		return Message{}, err
	}
	if string(key) != m.SellerID {
		return Message{}, fmt.Errorf("%w: the message key names seller %q but field seller_id is %q; a row belongs to one seller", ErrBadMessage, key, m.SellerID)
	}
	return m, nil
}

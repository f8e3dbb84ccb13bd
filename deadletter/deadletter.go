// Package deadletter is the dead-letter topic's record: a row that will not
// be registered, written by the consumer with its original key and value and
// headers that say why (Row, Row.KafkaMessage, KafkaWriter), and read back
// by package redrive. The header names and error classes are the contract
// between the two.
package deadletter

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// Dead-letter headers. The value and key are the original message's.
const (
	HeaderTopic        = "bulkreg-original-topic"
	HeaderPartition    = "bulkreg-original-partition"
	HeaderOffset       = "bulkreg-original-offset"
	HeaderErrorClass   = "bulkreg-error-class"
	HeaderErrorMessage = "bulkreg-error-message"
	HeaderAttempts     = "bulkreg-attempts"
	HeaderFirstFailure = "bulkreg-first-failure" // RFC 3339 with nanoseconds

	// RedriveHeaderPrefix starts the headers a redrive adds to a row it
	// publishes again; a dead letter of such a row carries them on.
	RedriveHeaderPrefix = "bulkreg-redrive-"
)

// Error classes in HeaderErrorClass besides the registry client's classes.
const (
	// ClassBadMessage: the value is not a row message (bulkreg.DecodeRecord
	// refused it: a field missing or malformed, an upload_id outside its
	// format, an Idempotency-Key that is not <upload_id>:<row>, a key and
	// value naming different sellers), or it names an upload no producer
	// created. Never retried: nothing was registered, and no
	// upload's status shows it.
	ClassBadMessage = "bad-message"
)

// Row is a row that will not be registered, with the reason: a dead letter
// as the consumer writes it.
type Row struct {
	Original kafka.Message
	Class    string // ClassBadMessage, or the registry client's class: "transient", "rate_limited", "misconfigured"
	Message  string // the last error, a sentence for operators (the DLQ's headers)
	// Detail is the last failure as the row's seller reads it
	// (registryclient.Result.SellerDetail): never a URL or an address.
	Detail       string
	Attempts     int // calls made to the API (0 for a bad message)
	FirstFailure time.Time
}

// KafkaWriter writes rows to the dead-letter topic with acks from all
// in-sync replicas.
type KafkaWriter struct {
	w *kafka.Writer
}

// NewKafkaWriter writes to topic on brokers (transport nil: plain TCP).
func NewKafkaWriter(brokers []string, topic string, transport kafka.RoundTripper) *KafkaWriter {
	return &KafkaWriter{w: &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond, // a dead letter is rare; do not wait for a batch
		MaxAttempts:  3,
		// bulkreg never creates topics: a missing dead-letter topic is an
		// operator's mistake, answered as a failed write (the row stays
		// unfinished and is tried again), not papered over.
		AllowAutoTopicCreation: false,
		Transport:              transport,
	}}
}

// WriteDeadLetter returns once the broker acknowledged the row.
func (k *KafkaWriter) WriteDeadLetter(ctx context.Context, d Row) error {
	if err := k.w.WriteMessages(ctx, d.KafkaMessage()); err != nil {
		return fmt.Errorf("write to dead-letter topic %s: %w", k.w.Topic, err)
	}
	return nil
}

// Close flushes and closes the writer.
func (k *KafkaWriter) Close() error { return k.w.Close() }

// KafkaMessage is the row as the dead-letter topic holds it: the original key
// and value, the headers above.
func (d Row) KafkaMessage() kafka.Message {
	first := ""
	if !d.FirstFailure.IsZero() {
		first = d.FirstFailure.UTC().Format(time.RFC3339Nano)
	}
	headers := []kafka.Header{
		{Key: HeaderTopic, Value: []byte(d.Original.Topic)},
		{Key: HeaderPartition, Value: []byte(strconv.Itoa(d.Original.Partition))},
		{Key: HeaderOffset, Value: []byte(strconv.FormatInt(d.Original.Offset, 10))},
		{Key: HeaderErrorClass, Value: []byte(d.Class)},
		{Key: HeaderErrorMessage, Value: []byte(d.Message)},
		{Key: HeaderAttempts, Value: []byte(strconv.Itoa(d.Attempts))},
		{Key: HeaderFirstFailure, Value: []byte(first)},
	}
	// A redriven row keeps its redrive headers (package redrive), so a row
	// redriven and given up again shows how often it was redriven.
	for _, h := range d.Original.Headers {
		if strings.HasPrefix(h.Key, RedriveHeaderPrefix) {
			headers = append(headers, h)
		}
	}
	return kafka.Message{Key: d.Original.Key, Value: d.Original.Value, Headers: headers}
}

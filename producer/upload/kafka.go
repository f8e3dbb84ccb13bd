package upload

import (
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
)

// WriterOptions configure the Kafka writer of the rows topic.
type WriterOptions struct {
	Brokers []string
	Topic   string
	// WriteTimeout bounds one produce request to the broker (kafka-go's
	// WriteTimeout). Default 10s.
	WriteTimeout time.Duration
	// BatchTimeout is how long a partial batch waits for more rows. An upload
	// hands every row over at once, so waiting gains nothing: default 5ms.
	BatchTimeout time.Duration
	// MaxAttempts per batch before the upload is answered as failed. Default 3.
	MaxAttempts int
	// BatchSize is the most rows in one produce request. Default
	// DefaultPublishBatch, the rows an Uploader hands over at once: one
	// seller's rows go to one partition, so each handover fills a batch and
	// leaves at once instead of waiting BatchTimeout for more.
	BatchSize int
	// Transport carries SASL and TLS (config.Config.KafkaTransport); nil: plain TCP.
	Transport kafka.RoundTripper
}

// NewWriter returns the writer of the rows topic: every row acknowledged by
// all in-sync replicas, keyed by seller and placed by a hash of the key (so
// one seller's rows keep their order on one partition), batched so one
// upload takes a few produce requests. It never creates the topic: a missing
// topic in production is an operator's mistake to report, not to paper over.
func NewWriter(o WriterOptions) (*kafka.Writer, error) {
	if len(o.Brokers) == 0 {
		return nil, fmt.Errorf("kafka writer: no brokers")
	}
	if o.Topic == "" {
		o.Topic = bulkreg.DefaultTopic
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = 5 * time.Millisecond
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultPublishBatch
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	return &kafka.Writer{
		Addr:                   kafka.TCP(o.Brokers...),
		Topic:                  o.Topic,
		Balancer:               &kafka.Hash{},
		RequiredAcks:           kafka.RequireAll,
		BatchSize:              o.BatchSize,
		BatchTimeout:           o.BatchTimeout,
		WriteTimeout:           o.WriteTimeout,
		ReadTimeout:            o.WriteTimeout,
		MaxAttempts:            o.MaxAttempts,
		WriteBackoffMin:        50 * time.Millisecond,
		WriteBackoffMax:        500 * time.Millisecond,
		AllowAutoTopicCreation: false,
		Transport:              o.Transport,
	}, nil
}

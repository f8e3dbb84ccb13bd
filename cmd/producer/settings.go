package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/config"
	"github.com/bulkreg/bulkreg/producer"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// settings are the producer's own settings next to the shared ones. Each
// subcommand binds the groups it uses, so its -h lists only those.
type settings struct {
	shared config.Config

	// Kafka
	writeTimeout   time.Duration
	publishTimeout time.Duration
	maxAttempts    int
	// upload status
	staleAfter      time.Duration
	statusRetention time.Duration
	pollInterval    time.Duration
	// files
	maxFileSize int
	// HTTP service
	addr             string
	jwtSecret        string
	readTimeout      time.Duration
	httpWriteTimeout time.Duration
	shutdownTimeout  time.Duration
	maxUploads       int
	logLevel         string
}

func defaults() *settings {
	return &settings{
		shared:           config.Default(),
		writeTimeout:     10 * time.Second,
		publishTimeout:   30 * time.Second,
		maxAttempts:      3,
		staleAfter:       2 * time.Minute,
		statusRetention:  7 * 24 * time.Hour,
		pollInterval:     time.Second,
		maxFileSize:      excel.DefaultMaxFileSize,
		addr:             ":8080",
		readTimeout:      time.Minute,
		httpWriteTimeout: 2 * time.Minute,
		shutdownTimeout:  30 * time.Second,
		maxUploads:       16,
		logLevel:         "info",
	}
}

type group int

const (
	gKafka group = 1 << iota // brokers and topic
	gRedis
	gLimit // the API's limit and window (the compliance report)
	gPublish
	gStatus
	gWait // --wait's polling (upload, status)
	gFile
	gHTTP
	gSecret
)

// bind registers the settings of the given groups on fs and returns a
// function that reports malformed environment values and invalid settings,
// each naming its flag and variable.
func (s *settings) bind(fs *flag.FlagSet, getenv func(string) string, groups group) func() error {
	b := config.NewBinder(fs, getenv)
	// The shared settings a producer uses, named and described as in the
	// operators' table (config.Config.Bind would also list the consumer's).
	if groups&gKafka != 0 {
		b.List(&s.shared.KafkaBrokers, "kafka-brokers", "comma-separated Kafka bootstrap brokers")
		b.String(&s.shared.Topic, "topic", "rows topic the upload's rows are published to")
	}
	if groups&gRedis != 0 {
		b.List(&s.shared.RedisAddrs, "redis-addrs", "Redis address; several comma-separated addresses mean Redis Cluster")
	}
	if groups&gLimit != 0 {
		b.Int(&s.shared.Limit, "limit", "registrations per seller per window (the API's limit)")
		b.Duration(&s.shared.Window, "window", "the registration API's trailing window")
	}
	if groups&gPublish != 0 {
		b.Duration(&s.writeTimeout, "write-timeout", "timeout of one produce request to Kafka")
		b.Duration(&s.publishTimeout, "publish-timeout", "an upload whose rows Kafka has not all acknowledged by then fails and can be sent again")
		b.Int(&s.maxAttempts, "publish-attempts", "attempts per batch of rows before the upload fails")
		b.Duration(&s.staleAfter, "stale-after", "an upload left \"publishing\" this long (its producer died) is published again when the same file comes back")
	}
	if groups&gStatus != 0 {
		b.Duration(&s.statusRetention, "status-retention", "how long an upload's status and row results are kept after its last change")
	}
	if groups&gWait != 0 {
		b.Duration(&s.pollInterval, "poll-interval", "how often --wait reads the upload's progress")
	}
	if groups&gFile != 0 {
		b.Int(&s.maxFileSize, "max-file-size", "largest spreadsheet accepted, in bytes")
	}
	if groups&gHTTP != 0 {
		b.String(&s.addr, "addr", "listen address of the HTTP upload service")
		b.Duration(&s.readTimeout, "read-timeout", "time to read a whole request, body included")
		b.Duration(&s.httpWriteTimeout, "http-write-timeout", "time to handle a request and write its answer (an upload publishes before answering)")
		b.Duration(&s.shutdownTimeout, "shutdown-timeout", "after SIGTERM, how long requests in progress get to finish")
		b.Int(&s.maxUploads, "max-uploads", "most uploads handled at once (each holds its file in memory); more are answered 503")
		b.String(&s.logLevel, "log-level", "debug, info, warn or error")
	}
	if groups&gSecret != 0 {
		b.String(&s.jwtSecret, "jwt-secret", fmt.Sprintf("HS256 secret that signs sellers' bearer tokens (at least %d bytes)", producer.MinSecretLen))
	}
	return func() error {
		errs := []error{b.Err()}
		// The settings this subcommand did not bind keep their valid defaults.
		errs = append(errs, s.shared.Validate())
		bad := func(name, format string, args ...any) {
			errs = append(errs, fmt.Errorf("--%s (%s): %s", name, config.EnvName(name), fmt.Sprintf(format, args...)))
		}
		positive := func(name string, d time.Duration) {
			if d <= 0 {
				bad(name, "must be greater than 0, got %s", d)
			}
		}
		if groups&gPublish != 0 {
			positive("write-timeout", s.writeTimeout)
			positive("publish-timeout", s.publishTimeout)
			positive("stale-after", s.staleAfter)
			if s.staleAfter <= s.publishTimeout {
				// A live producer must never look dead to the next attempt.
				bad("stale-after", "must be longer than --publish-timeout (%s), got %s", s.publishTimeout, s.staleAfter)
			}
			if s.maxAttempts < 1 {
				bad("publish-attempts", "must be at least 1, got %d", s.maxAttempts)
			}
		}
		if groups&gStatus != 0 {
			positive("status-retention", s.statusRetention)
		}
		if groups&gWait != 0 {
			positive("poll-interval", s.pollInterval)
		}
		if groups&gFile != 0 && s.maxFileSize <= 0 {
			bad("max-file-size", "must be greater than 0, got %d", s.maxFileSize)
		}
		if groups&gHTTP != 0 {
			positive("read-timeout", s.readTimeout)
			positive("http-write-timeout", s.httpWriteTimeout)
			if groups&gPublish != 0 && s.httpWriteTimeout <= s.publishTimeout {
				bad("http-write-timeout", "must be longer than --publish-timeout (%s) so an upload is answered, got %s", s.publishTimeout, s.httpWriteTimeout)
			}
			positive("shutdown-timeout", s.shutdownTimeout)
			if s.maxUploads < 1 {
				bad("max-uploads", "must be at least 1, got %d", s.maxUploads)
			}
			var l slog.Level
			if err := l.UnmarshalText([]byte(s.logLevel)); err != nil {
				bad("log-level", "want debug, info, warn or error, got %q", s.logLevel)
			}
		}
		if groups&gSecret != 0 && len(s.jwtSecret) < producer.MinSecretLen {
			bad("jwt-secret", "must be at least %d bytes, got %d", producer.MinSecretLen, len(s.jwtSecret))
		}
		return errors.Join(errs...)
	}
}

func (s *settings) parser() *excel.Parser {
	return excel.NewParser(excel.Options{MaxFileSize: int64(s.maxFileSize)})
}

func (s *settings) redis() redis.UniversalClient { return s.shared.RedisClient() }

func (s *settings) store(rdb redis.UniversalClient) *uploadstatus.Store {
	return uploadstatus.New(rdb, s.statusRetention)
}

// uploader wires the parser, the Kafka writer and the status store; close
// releases the writer and Redis.
func (s *settings) uploader(log *slog.Logger) (*producer.Uploader, func(), error) {
	w, err := producer.NewWriter(producer.WriterOptions{Brokers: s.shared.KafkaBrokers, Topic: s.shared.Topic,
		WriteTimeout: s.writeTimeout, MaxAttempts: s.maxAttempts})
	if err != nil {
		return nil, nil, err
	}
	rdb := s.redis()
	up := &producer.Uploader{Parser: s.parser(), Writer: w, Status: s.store(rdb),
		PublishTimeout: s.publishTimeout, StaleAfter: s.staleAfter, Logger: log}
	return up, func() { w.Close(); rdb.Close() }, nil
}

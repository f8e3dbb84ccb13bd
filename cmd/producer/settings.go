package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/config"
	"github.com/bulkreg/bulkreg/internal/health"
	"github.com/bulkreg/bulkreg/internal/logsum"
	"github.com/bulkreg/bulkreg/internal/sellertime"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/producer/httpapi"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/throttle"
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
	// each seller's share of Redis
	shareBytes         int64
	shareUploads       int
	checkOnlyRetention time.Duration
	// files
	maxFileSize    int
	categoriesFile string
	// HTTP service
	addr                string
	adminAddr           string
	publicURL           string
	sellerCenterURL     string
	sessionTTL          time.Duration
	linkMaxAge          time.Duration
	secureCookies       bool
	eventsInterval      time.Duration
	sellerTimeZone      string
	readTimeout         time.Duration
	httpWriteTimeout    time.Duration
	shutdownTimeout     time.Duration
	maxUploads          int
	maxUploadsPerSeller int
	minUploadRate       int
	uploadGrace         time.Duration
	maxReports          int
	maxReportsPerSeller int
	minDownloadRate     int
	downloadGrace       time.Duration
	maxConnsPerIP       int
	anonymousIdle       time.Duration
	readiness           health.Settings // /readyz's checks of Redis and Kafka
	logLevel            string
	logRepeat           time.Duration
	// tokens
	jwtSecret             string
	jwtPublicKeys         string
	jwtOperatorSecret     string
	jwtOperatorPublicKeys string
	jwtIssuer             string
	jwtAudience           string
	jwtMaxLifetime        time.Duration
}

func defaults() *settings {
	return &settings{
		shared:          config.Default(),
		writeTimeout:    10 * time.Second,
		publishTimeout:  30 * time.Second,
		maxAttempts:     3,
		staleAfter:      2 * time.Minute,
		statusRetention: 7 * 24 * time.Hour,

		shareBytes:         uploadstatus.DefaultShareBytes,
		shareUploads:       uploadstatus.DefaultShareUploads,
		checkOnlyRetention: upload.DefaultCheckOnlyRetention,
		pollInterval:       time.Second,
		maxFileSize:        excel.DefaultMaxFileSize,
		addr:               ":8080",
		adminAddr:          "127.0.0.1:9465",
		publicURL:          "http://localhost:8080",
		sessionTTL:         httpapi.DefaultSessionTTL,
		linkMaxAge:         httpapi.DefaultLinkMaxAge,
		eventsInterval:     httpapi.DefaultEventsInterval,
		sellerTimeZone:     sellertime.DefaultZone,
		readTimeout:        time.Minute,
		httpWriteTimeout:   2 * time.Minute,
		shutdownTimeout:    30 * time.Second,
		maxUploads:         httpapi.DefaultMaxUploads,
		logLevel:           "info",
		logRepeat:          logsum.DefaultInterval,

		maxUploadsPerSeller: httpapi.DefaultMaxUploadsPerSeller,
		minUploadRate:       httpapi.DefaultMinUploadRate,
		uploadGrace:         httpapi.DefaultUploadGrace,
		maxReports:          httpapi.DefaultMaxReports,
		maxReportsPerSeller: httpapi.DefaultMaxReportsPerSeller,
		minDownloadRate:     httpapi.DefaultMinDownloadRate,
		downloadGrace:       httpapi.DefaultDownloadGrace,
		maxConnsPerIP:       httpapi.DefaultMaxConnsPerIP,
		anonymousIdle:       httpapi.DefaultAnonymousIdle,
		readiness:           health.DefaultSettings(),
		jwtIssuer:           httpapi.DefaultIssuer,
		jwtAudience:         httpapi.DefaultAudience,
		jwtMaxLifetime:      httpapi.DefaultMaxLifetime,
	}
}

type group int

const (
	gKafka group = 1 << iota // brokers and topic
	gRedis
	gLimit // the API's limit, window and counting policy (the compliance report, the finish estimate)
	gPublish
	gStatus
	gWait // --wait's polling (upload, status)
	gFile
	gHTTP
	gSecret
	gLink     // the public URL and how long a sign-in link lives (serve, token)
	gMargin   // the throttle's margin (serve's finish estimate)
	gShare    // each seller's share of Redis, and how long an upload that published nothing is kept (serve, upload)
	gTemplate // what the template holds beyond the upload format (serve, template)
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
		s.shared.BindKafkaAuth(b)
	}
	if groups&gRedis != 0 {
		b.List(&s.shared.RedisAddrs, "redis-addrs", "Redis address; several comma-separated addresses mean Redis Cluster (or, with --redis-sentinel-master, the sentinels)")
		b.String(&s.shared.RedisSentinelMaster, "redis-sentinel-master", "the master name Redis Sentinel watches; set it to use Sentinel, with the sentinels' addresses in --redis-addrs")
		s.shared.BindRedisAuth(b)
	}
	if groups&gLimit != 0 {
		b.Int(&s.shared.Limit, "limit", "registrations per seller per window (the API's limit)")
		b.Duration(&s.shared.Window, "window", "the registration API's trailing window")
		b.String(&s.shared.Policy, "policy", "how the API counts its limit, as the consumers' --policy: sliding, fixed or token-bucket; the compliance report and the finish estimate count the same way")
		b.Int(&s.shared.Burst, "burst", "with --policy token-bucket: the API's bucket capacity, as the consumers' --burst (0 = --limit)")
		s.shared.BindGlobal(b)
	}
	if groups&gPublish != 0 {
		b.Duration(&s.writeTimeout, "write-timeout", "timeout of one produce request to Kafka")
		b.Duration(&s.publishTimeout, "publish-timeout", "an upload whose rows Kafka has not all acknowledged by then fails and can be sent again")
		b.Int(&s.maxAttempts, "publish-attempts", "attempts per batch of rows before the upload fails")
		b.Duration(&s.staleAfter, "stale-after", "an upload left \"publishing\" this long after Kafka last acknowledged one of its batches (its producer died) is resumed when the same file comes back: only its unacknowledged rows are published")
	}
	if groups&gStatus != 0 {
		b.Duration(&s.statusRetention, "status-retention", "how long an upload's status and row results are kept after its last change")
	}
	if groups&gShare != 0 {
		b.Bytes(&s.shareBytes, "seller-share-bytes", "most bytes one seller's uploads keep in Redis (their status, row results and report cells); an upload past it is refused with 429 share_full until older ones expire (0 = no bound)")
		b.Int(&s.shareUploads, "seller-share-uploads", "most uploads one seller keeps in Redis; an upload past it is refused with 429 share_full until older ones expire (0 = no bound)")
		b.Duration(&s.checkOnlyRetention, "check-only-retention", "how long an upload that published nothing (every row refused, or registered before) is kept: a check's result, which then leaves the seller's share; at most --status-retention")
	}
	if groups&gWait != 0 {
		b.Duration(&s.pollInterval, "poll-interval", "how often --wait reads the upload's progress")
	}
	if groups&gFile != 0 {
		b.Int(&s.maxFileSize, "max-file-size", "largest spreadsheet accepted, in bytes")
	}
	if groups&gTemplate != 0 {
		b.String(&s.categoriesFile, "categories-file", "CSV file of the marketplace's categories, a code and a name a line: the template lists them and its category column takes only their codes; empty: any code, and the template says to look codes up in the seller center")
	}
	if groups&gHTTP != 0 {
		b.String(&s.addr, "addr", "listen address of the HTTP upload service")
		b.Duration(&s.readTimeout, "read-timeout", "time to read a whole request, body included")
		b.Duration(&s.httpWriteTimeout, "http-write-timeout", "time to handle a request and write its answer (an upload publishes before answering)")
		b.Duration(&s.shutdownTimeout, "shutdown-timeout", "after SIGTERM, how long requests in progress get to finish")
		b.Int(&s.maxUploads, "max-uploads", "most uploads handled at once (each holds its file in memory); more are answered 503")
		b.Int(&s.maxUploadsPerSeller, "max-uploads-per-seller", "most uploads of one seller handled at once; more are answered 429")
		b.Int(&s.minUploadRate, "min-upload-rate", "slowest average rate, in bytes per second, at which an upload's body may arrive after --upload-grace; a slower one is cut off (408)")
		b.Duration(&s.uploadGrace, "upload-grace", "time an upload's body may take before --min-upload-rate applies")
		b.Int(&s.maxReports, "max-reports", "most result reports built or downloaded at once; more are answered 503")
		b.Int(&s.maxReportsPerSeller, "max-reports-per-seller", "most reports of one seller built or downloaded at once; more are answered 429")
		b.Int(&s.minDownloadRate, "min-download-rate", "slowest average rate, in bytes per second, at which a client may read a report or an upload's answer after --download-grace; a slower one is cut off and its slot given back")
		b.Duration(&s.downloadGrace, "download-grace", "time from an answer's first byte before --min-download-rate applies")
		b.Int(&s.maxConnsPerIP, "max-conns-per-ip", "most connections one client IP address may hold to --addr; more are closed at once (0 = no cap; behind a reverse proxy every client has the proxy's address)")
		b.Duration(&s.anonymousIdle, "anonymous-idle-timeout", "how long a connection that has not sent a valid token or session is kept waiting for a request (signed-in connections keep 2m)")
		b.String(&s.adminAddr, "admin-addr", "listen address of /metrics, /livez, /readyz and /healthz, apart from the sellers' port")
		s.readiness.Bind(b, "Redis (a PING) and Kafka (a connection of their own that asks for the rows topic's leaders)")
		b.Duration(&s.sessionTTL, "session-ttl", "how long a seller stays signed in to the pages after opening a sign-in link")
		b.URL(&s.sellerCenterURL, "seller-center-url", "where sellers sign in to the seller center that gives them sign-in links; every page that asks to sign in links to it (empty: the pages say in words to open the link from the seller center)")
		b.Bool(&s.secureCookies, "secure-cookies", "mark the session cookie Secure on every answer (behind a proxy that ends TLS); requests over TLS get it anyway")
		b.Duration(&s.eventsInterval, "events-interval", "how often a progress stream (server-sent events) reads the upload's progress, and an open history page its uploads")
		b.String(&s.sellerTimeZone, "seller-time-zone", "the time zone (IANA name) pages, progress events and reports say times in until a seller's browser tells its own")
		b.String(&s.logLevel, "log-level", "debug, info, warn or error")
		b.Duration(&s.logRepeat, "log-repeat-interval", logRepeatUsage)
	}
	if groups&gLink != 0 {
		b.URL(&s.publicURL, "public-url", "the upload service's address as sellers' browsers reach it; sign-in links start with it")
		b.Duration(&s.linkMaxAge, "link-max-age", "longest a sign-in link may be valid; serve refuses a link token that lives longer")
	}
	if groups&gMargin != 0 {
		b.Duration(&s.shared.Margin, "margin", "the consumers' throttle margin (added to the window); the finish estimate uses it")
	}
	if groups&gSecret != 0 {
		b.Secret(&s.jwtSecret, "jwt-secret", fmt.Sprintf("HS256 secret of sellers' bearer tokens (at least %d bytes)", httpapi.MinSecretLen))
		b.String(&s.jwtPublicKeys, "jwt-public-keys", "file of the public keys that verify sellers' RS256/EdDSA tokens: PEM or a JWKS document")
		b.Secret(&s.jwtOperatorSecret, "jwt-operator-secret", "HS256 secret of operators' tokens (GET /v1/compliance); must differ from --jwt-secret")
		b.String(&s.jwtOperatorPublicKeys, "jwt-operator-public-keys", "file of the public keys that verify operators' RS256/EdDSA tokens: PEM or a JWKS document")
		b.String(&s.jwtIssuer, "jwt-issuer", "the \"iss\" every token must carry")
		b.String(&s.jwtAudience, "jwt-audience", "the \"aud\" every token must carry")
		b.Duration(&s.jwtMaxLifetime, "jwt-max-lifetime", "longest a token may be valid (exp − now and exp − iat)")
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
		atLeast1 := func(name string, n int, what string) {
			if n < 1 {
				bad(name, "must be at least 1%s, got %d", what, n)
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
			atLeast1("publish-attempts", s.maxAttempts, "")
		}
		if groups&gStatus != 0 {
			positive("status-retention", s.statusRetention)
		}
		if groups&gShare != 0 {
			if s.shareBytes != 0 && s.shareBytes < shareFloor {
				// One upload may keep up to the cost ceiling; a smaller share
				// would refuse a seller's first file.
				bad("seller-share-bytes", "must be 0 (no bound) or at least %s, what one upload may keep, got %s", config.FormatBytes(shareFloor), config.FormatBytes(s.shareBytes))
			}
			if s.shareUploads < 0 {
				bad("seller-share-uploads", "must not be negative (0 means no bound), got %d", s.shareUploads)
			}
			positive("check-only-retention", s.checkOnlyRetention)
			if groups&gStatus != 0 && s.checkOnlyRetention > s.statusRetention {
				bad("check-only-retention", "must be at most --status-retention (%s), got %s", s.statusRetention, s.checkOnlyRetention)
			}
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
			// Uploads and reports, each: how many at once, per seller, and
			// how slow a body may come or go before it is cut off.
			atLeast1("max-uploads", s.maxUploads, "")
			atLeast1("max-uploads-per-seller", s.maxUploadsPerSeller, "")
			atLeast1("min-upload-rate", s.minUploadRate, " byte per second")
			positive("upload-grace", s.uploadGrace)
			atLeast1("max-reports", s.maxReports, "")
			atLeast1("max-reports-per-seller", s.maxReportsPerSeller, "")
			atLeast1("min-download-rate", s.minDownloadRate, " byte per second")
			positive("download-grace", s.downloadGrace)
			if s.maxConnsPerIP < 0 {
				bad("max-conns-per-ip", "must not be negative (0 means no cap), got %d", s.maxConnsPerIP)
			}
			positive("anonymous-idle-timeout", s.anonymousIdle)
			positive("session-ttl", s.sessionTTL)
			if s.sellerCenterURL != "" {
				if err := config.ValidHTTPURL(s.sellerCenterURL); err != nil {
					bad("seller-center-url", "%v", err)
				}
			}
			positive("events-interval", s.eventsInterval)
			if _, err := sellertime.Load(s.sellerTimeZone); err != nil {
				bad("seller-time-zone", "%v", err)
			}
			if err := s.readiness.Validate(); err != nil {
				errs = append(errs, err)
			}
			if s.adminAddr == "" {
				bad("admin-addr", "must not be empty: /metrics and the probes (/livez, /readyz, /healthz) need a listener of their own")
			} else if s.adminAddr == s.addr {
				bad("admin-addr", "must differ from --addr (%s): sellers must not reach /metrics", s.addr)
			}
			var l slog.Level
			if err := l.UnmarshalText([]byte(s.logLevel)); err != nil {
				bad("log-level", "want debug, info, warn or error, got %q", s.logLevel)
			}
			if s.logRepeat < 0 {
				bad("log-repeat-interval", "must not be negative (0 writes every line), got %s", s.logRepeat)
			}
		}
		if groups&gLink != 0 {
			positive("link-max-age", s.linkMaxAge)
			if err := config.ValidHTTPURL(s.publicURL); err != nil {
				bad("public-url", "%v", err)
			}
		}
		if groups&gSecret != 0 {
			// Lengths only: a secret's value never goes into a message.
			if s.jwtSecret != "" && len(s.jwtSecret) < httpapi.MinSecretLen {
				bad("jwt-secret", "must be at least %d bytes, got %d", httpapi.MinSecretLen, len(s.jwtSecret))
			}
			if s.jwtOperatorSecret != "" && len(s.jwtOperatorSecret) < httpapi.MinSecretLen {
				bad("jwt-operator-secret", "must be at least %d bytes, got %d", httpapi.MinSecretLen, len(s.jwtOperatorSecret))
			}
			if s.jwtOperatorSecret != "" && s.jwtOperatorSecret == s.jwtSecret {
				bad("jwt-operator-secret", "must differ from --jwt-secret: whoever can sign sellers' tokens must not be able to sign an operator's")
			}
			if strings.TrimSpace(s.jwtIssuer) == "" {
				bad("jwt-issuer", "must not be empty: every token must name its issuer")
			}
			if strings.TrimSpace(s.jwtAudience) == "" {
				bad("jwt-audience", "must not be empty: every token must name bulkreg as its audience")
			}
			positive("jwt-max-lifetime", s.jwtMaxLifetime)
		}
		return errors.Join(errs...)
	}
}

// auth loads the keys serve checks tokens with; it needs a seller key (a
// secret or public keys).
func (s *settings) auth() (httpapi.Auth, error) {
	a := httpapi.Auth{Secret: []byte(s.jwtSecret), OperatorSecret: []byte(s.jwtOperatorSecret),
		Issuer: s.jwtIssuer, Audience: s.jwtAudience, MaxLifetime: s.jwtMaxLifetime, Leeway: 30 * time.Second}
	var err error
	if s.jwtPublicKeys != "" {
		if a.PublicKeys, err = httpapi.LoadPublicKeys(s.jwtPublicKeys); err != nil {
			return a, fmt.Errorf("--jwt-public-keys (%s): %w", config.EnvName("jwt-public-keys"), err)
		}
	}
	if s.jwtOperatorPublicKeys != "" {
		if a.OperatorPublicKeys, err = httpapi.LoadPublicKeys(s.jwtOperatorPublicKeys); err != nil {
			return a, fmt.Errorf("--jwt-operator-public-keys (%s): %w", config.EnvName("jwt-operator-public-keys"), err)
		}
	}
	if len(a.Secret) == 0 && len(a.PublicKeys) == 0 {
		return a, fmt.Errorf("--jwt-secret (%s) or --jwt-public-keys (%s): one is needed to check sellers' tokens",
			config.EnvName("jwt-secret"), config.EnvName("jwt-public-keys"))
	}
	return a, nil
}

// secureCookie tells whether serve marks the session cookie Secure: when
// asked, or when sellers reach the service over https. The scheme is read as
// url.Parse reads it, lower-cased, so HTTPS://… counts as https.
func (s *settings) secureCookie() bool {
	u, err := url.Parse(s.publicURL)
	return s.secureCookies || err == nil && u.Scheme == "https"
}

func (s *settings) minter(secret string) httpapi.Minter {
	return httpapi.Minter{Secret: []byte(secret), Issuer: s.jwtIssuer, Audience: s.jwtAudience, MaxLifetime: s.jwtMaxLifetime}
}

// categories reads --categories-file; none when it is not set.
func (s *settings) categories() ([]excel.Category, error) {
	if s.categoriesFile == "" {
		return nil, nil
	}
	f, err := os.Open(s.categoriesFile)
	if err != nil {
		return nil, fmt.Errorf("--categories-file (%s): %w", config.EnvName("categories-file"), err)
	}
	defer f.Close()
	cats, err := excel.ReadCategories(f)
	if err != nil {
		return nil, fmt.Errorf("--categories-file (%s): %s: %w", config.EnvName("categories-file"), s.categoriesFile, err)
	}
	return cats, nil
}

func (s *settings) parser() *excel.Parser {
	return excel.NewParser(excel.Options{MaxFileSize: int64(s.maxFileSize)})
}

func (s *settings) redis() redis.UniversalClient { return s.shared.RedisClient() }

// marketplace reads the consumers' circuit breaker, to tell sellers whether
// the registration API answers. Peek reads only the state, and Seller reads
// the window's ring in the shape the consumers wrote it
// (lua/circuit_seller.lua), so the consumers' circuit settings do not matter
// here. A seller's failing streak counts for a limit window and a margin
// after its last failure (upload.HoldFailing): at its limit the seller
// calls in bursts that far apart.
func (s *settings) marketplace(rdb redis.UniversalClient) upload.Marketplace {
	b, err := circuit.New(rdb, circuit.Settings{})
	if err != nil { // only a nil client or invalid settings, neither possible here
		return nil
	}
	return upload.HoldFailing(b, s.shared.Window+s.shared.Margin)
}

func (s *settings) store(rdb redis.UniversalClient) *uploadstatus.Store {
	return uploadstatus.New(rdb, s.statusRetention, uploadstatus.WithShare(uploadstatus.Share{Bytes: s.shareBytes, Uploads: s.shareUploads}))
}

// shareFloor is the smallest --seller-share-bytes: the most one upload
// keeps in Redis (the cost ceiling of an upload, ARCHITECTURE.md).
const shareFloor = 8 << 20

// uploader wires the parser, the Kafka writer, the status store and the SKU
// ledger (read only here: its retention and leases are the consumers'
// settings); close releases the writer and Redis.
func (s *settings) uploader(log *slog.Logger) (*upload.Uploader, func(), error) {
	w, err := upload.NewWriter(upload.WriterOptions{Brokers: s.shared.KafkaBrokers, Topic: s.shared.Topic,
		WriteTimeout: s.writeTimeout, MaxAttempts: s.maxAttempts, Transport: s.shared.KafkaTransport()})
	if err != nil {
		return nil, nil, err
	}
	rdb := s.redis()
	store := s.store(rdb)
	up := &upload.Uploader{Parser: s.parser(), Writer: w, Statuses: store, Index: store, Ledger: ledger.New(rdb, ledger.Options{}),
		PublishTimeout: s.publishTimeout, StaleAfter: s.staleAfter, Logger: log, CheckOnlyRetention: s.checkOnlyRetention}
	return up, func() { w.Close(); rdb.Close() }, nil
}

// policy is the consumers' throttle policy as far as the producer needs it:
// the API's limit, window and counting policy, and the margin.
func (s *settings) policy() throttle.Policy {
	return throttle.Policy{Kind: throttle.Kind(s.shared.Policy), Limit: s.shared.Limit, Window: s.shared.Window, Margin: s.shared.Margin, Burst: s.shared.Burst}
}

// throttle reads the sellers' slots for the finish estimate, with the
// consumers' policy (it takes none).
func (s *settings) throttle(rdb redis.UniversalClient) (*throttle.Throttle, error) {
	return throttle.New(rdb, s.policy())
}

// logRepeatUsage is --log-repeat-interval's help.
const logRepeatUsage = "a log line repeated with the same level and message is written once, then once per this interval with the count of repeats (repeated, within_seconds); 0 writes every line"

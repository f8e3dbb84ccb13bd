// Package registryclient is the only code that talks to the product
// registration API. It turns every answer — status codes, bodies, timeouts,
// broken connections — into one of six classes so that callers switch on
// what to do next, never on HTTP details. The classes say whose fault an
// answer is: the row's content (Permanent), the seller's pace (RateLimited),
// nobody's yet (Transient), or bulkreg's own configuration (Misconfigured).
//
// The client never retries on its own: every attempt must take a new throttle
// slot first, so retries belong to the caller, who gets a RetryPolicy to pace
// them.
package registryclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/redact"
	"github.com/bulkreg/bulkreg/messages"
)

// Class is what a caller should do with an answer.
type Class int

const (
	// Registered: 201, a new product exists. Record success.
	Registered Class = iota + 1
	// Replayed: 200, the Idempotency-Key was registered before; same
	// product, not a second one. Record success.
	Replayed
	// Permanent: the row itself is wrong (400, 409, 422, other 4xx).
	// Retrying cannot help; show Code, Message and Field to the seller.
	Permanent
	// RateLimited: 429. Block the seller for RetryAfter, then retry.
	RateLimited
	// Transient: 5xx, 408, timeout, connection error or an unreadable
	// answer. Retry with backoff; the Idempotency-Key makes that safe.
	Transient
	// Misconfigured: the API refused bulkreg itself, not the row: 401 or
	// 403 (credentials missing, wrong or rotated), 407 (a proxy's), 405, a
	// 404 that is not the contract's JSON error (no such route: a wrong
	// base URL), or a 3xx (redirects are not followed). Every row would get
	// the same answer, so none is the row's fault: stop calling until an
	// operator fixes the configuration, keep the row, spend none of its
	// attempts.
	Misconfigured
)

func (c Class) String() string {
	switch c {
	case Registered:
		return "registered"
	case Replayed:
		return "replayed"
	case Permanent:
		return "permanent"
	case RateLimited:
		return "rate_limited"
	case Transient:
		return "transient"
	case Misconfigured:
		return "misconfigured"
	}
	return "unknown"
}

// Result is the outcome of one call.
type Result struct {
	Class  Class
	Status int // HTTP status; 0 when no answer arrived
	// ProductID is set for Registered and Replayed.
	ProductID string
	// Code, Message and Field come from the API's error body when it sent one.
	Code    string
	Message string
	Field   string
	// RetryAfter is set for RateLimited: how long the API asked to wait,
	// at least one second.
	RetryAfter time.Duration
	// Scope is set for RateLimited: which limit refused the call, the
	// seller's own (ScopeSeller, also when the API does not say) or the
	// application's over all sellers (ScopeApp). Block that one.
	Scope Scope
	// Latency is the time from sending the request to reading the answer.
	Latency time.Duration
	// Failure says why no usable answer came, in words a seller may read
	// (SellerDetail): set when Status is 0, and when an answer's body could
	// not be read.
	Failure Failure
	// Err explains every class but Registered and Replayed as a sentence
	// for operators: logs and the dead-letter topic. It may name the API's
	// address and quote its answer, never a credential: the base URL shows
	// with its password hidden (it is kept apart from the URL, see New).
	Err error
}

// Failure is why a call got no usable answer.
type Failure string

// The failures of a call without a usable answer. Each is a variant of the
// message table's "call_failed" (package messages), which says it in Korean
// and English.
const (
	FailureTimeout     Failure = "timeout"     // no answer within the call's timeout
	FailureUnreachable Failure = "unreachable" // the connection could not be made (refused, no route, name not found)
	FailureClosed      Failure = "closed"      // the connection closed before a whole answer
	FailureUnreadable  Failure = "unreadable"  // something answered, but not as HTTP/1.1 bulkreg can read
	FailureTLS         Failure = "tls"         // the TLS handshake failed (certificate, protocol)
	FailureCancelled   Failure = "cancelled"   // the caller cancelled the call, or its deadline passed
	FailureNotSent     Failure = "not_sent"    // the client refused to send the call (a seller id or key it cannot send)
)

// SellerDetail is what a seller may read about an answer that did not
// register the row: "status 503" when the API answered, else what went
// wrong, from the message table in English ("the marketplace did not answer
// in time"). It never holds a URL, an address, a server's page or a
// credential, whatever the failure: operators read Err for that.
func (r Result) SellerDetail() string {
	if r.Status > 0 {
		return "status " + strconv.Itoa(r.Status)
	}
	s, _ := messages.Render(messages.EN, "call_failed", map[string]string{messages.KindParam: string(r.Failure)})
	return s
}

// Scope names the limit a 429 was answered for.
type Scope string

const (
	// ScopeSeller: the seller's own limit (the contract's 429).
	ScopeSeller Scope = "seller"
	// ScopeApp: the API's limit for the whole application, all sellers
	// together: the X-RateLimit-Scope header says "app", or the error code
	// is "app_rate_limited".
	ScopeApp Scope = "app"
)

// ScopeHeader is the answer header that names the limit of a 429.
const ScopeHeader = "X-RateLimit-Scope"

// OK reports whether the product is registered (new or replayed).
func (r Result) OK() bool { return r.Class == Registered || r.Class == Replayed }

// Options configure a Client. Zero values take the defaults noted.
type Options struct {
	// BaseURL of the API, for example http://localhost:8081. Required.
	// A user and password in it (https://svc:secret@host) are sent as HTTP
	// Basic auth with every call, as net/http sends them; like AuthHeader
	// they need https (or AllowInsecureAuth for a loopback host). It may
	// carry no query or fragment: the API takes none, and a credential put
	// there would be dropped without a word.
	BaseURL string
	// Timeout of one call, including reading the answer (default 10 s).
	Timeout time.Duration
	// AuthHeader, when set, is sent with every call, written as
	// "Name: value" (for example "Authorization: Bearer abc"). It requires
	// an https BaseURL, unless AllowInsecureAuth is set for a loopback one.
	AuthHeader string
	// AllowInsecureAuth lets AuthHeader, or the user and password of
	// BaseURL, travel over plain http to a
	// loopback host (127.0.0.0/8, ::1, localhost): a sandbox on the same
	// machine. Any other host still needs https.
	AllowInsecureAuth bool
	// MaxConnsPerHost caps connections to the API; idle connections kept
	// for reuse match it, so many concurrent calls do not redial (default 64).
	MaxConnsPerHost int
	// DefaultRetryAfter is used when a 429 carries no usable Retry-After
	// (default 1 s).
	DefaultRetryAfter time.Duration
	// TLSConfig is used (cloned) for an https BaseURL: a private CA's roots,
	// or a client certificate. Default: the system's roots.
	TLSConfig *tls.Config
	// HTTPClient replaces the client built from the options above (tests).
	HTTPClient *http.Client
	// Now is the clock for Retry-After dates (default time.Now).
	Now func() time.Time
}

// Client calls the registration API. It is safe for concurrent use.
type Client struct {
	// base is the base URL without its user information: every URL the
	// client builds, and so every message, comes from it. The credentials
	// live only in auth, as header fields.
	base     *url.URL
	sellers  string // base + "/v1/sellers/", the start of every registration's URL
	basePath string // the base URL's escaped path, for the direct call
	// direct is the synchronous transport when the client built it: then
	// Register calls through it without net/http's Client (exchange.go).
	direct  *syncTransport
	http    *http.Client
	timeout time.Duration
	// auth is sent with every call: the Basic auth of the URL's user and
	// password, and the AuthHeader, each formatted once.
	auth []field
	// secrets are the credentials in auth as an answer could echo them
	// (scrub.go): the password, the Basic credentials, the header's value
	// and its token, each in every form a message could show.
	secrets    secrets
	retryAfter time.Duration
	now        func() time.Time
}

// maxAnswer bounds how much of an answer is read: the contract's bodies are
// tiny, and an HTML error page from a proxy is not worth more.
const maxAnswer = 64 << 10

// New checks the options and builds a client. Its errors name the setting
// (--registry-url, --registry-auth-header, --registry-insecure-auth) and
// never show a credential.
func New(o Options) (*Client, error) {
	if o.BaseURL == "" {
		return nil, errors.New("registry URL is empty: set BULKREG_REGISTRY_URL or --registry-url")
	}
	base, err := url.Parse(o.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("registry URL %q (--registry-url, BULKREG_REGISTRY_URL) is not an absolute http(s) URL", redact.URL(o.BaseURL))
	}
	if base.RawQuery != "" || base.ForceQuery || base.Fragment != "" {
		return nil, fmt.Errorf("registry URL %q (--registry-url, BULKREG_REGISTRY_URL) has a query or fragment, which no call would carry: put a user and password in the URL (sent as Basic auth) or a key in --registry-auth-header", redact.Parsed(base))
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	base.RawPath = ""
	if o.Timeout < 0 {
		return nil, fmt.Errorf("registry timeout %v is negative", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxConnsPerHost < 0 {
		return nil, fmt.Errorf("registry max connections %d is negative", o.MaxConnsPerHost)
	}
	if o.MaxConnsPerHost == 0 {
		o.MaxConnsPerHost = 64
	}
	if o.DefaultRetryAfter <= 0 {
		o.DefaultRetryAfter = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var auth []field
	var whole, split []string
	basic := base.User != nil
	if user := base.User; user != nil {
		password, _ := user.Password()
		// As net/http's Request.SetBasicAuth: user:password, base64, the
		// unescaped forms of the URL's.
		cred := base64.StdEncoding.EncodeToString([]byte(user.Username() + ":" + password))
		auth = append(auth, field{"Authorization", "Basic " + cred})
		whole, split = append(whole, cred), append(split, password)
		base.User = nil
	}
	if o.AuthHeader != "" {
		name, value, ok := strings.Cut(o.AuthHeader, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || !tokenBytes([]byte(name)) || !validFieldValue(value) {
			return nil, errors.New(`registry auth header (--registry-auth-header, BULKREG_REGISTRY_AUTH_HEADER) must be written "Name: value", for example "Authorization: Bearer abc"`)
		}
		name = http.CanonicalHeaderKey(name)
		if len(auth) > 0 && name == "Authorization" {
			return nil, errors.New("the registry URL (--registry-url) carries a user and password, sent as an Authorization header (Basic auth), and --registry-auth-header sets Authorization too: keep one of them")
		}
		auth = append(auth, field{name, strings.TrimSpace(value)})
		whole = append(whole, strings.TrimSpace(value))
		if _, token, ok := strings.Cut(strings.TrimSpace(value), " "); ok { // "Bearer <token>": the token alone too
			split = append(split, strings.TrimSpace(token))
		}
	}
	if len(auth) > 0 && base.Scheme != "https" && !(o.AllowInsecureAuth && isLoopback(base.Hostname())) {
		what := "an auth header (--registry-auth-header) is configured"
		if basic {
			what = "it carries a user and password, sent as Basic auth"
		}
		if o.AllowInsecureAuth {
			return nil, fmt.Errorf("registry URL %q (--registry-url): %s, which may go over plain http only to a loopback host (127.0.0.1, ::1, localhost); use https", base.String(), what)
		}
		return nil, fmt.Errorf("registry URL %q (--registry-url): %s, so the URL must be https (for a sandbox on this machine, allow plain http with --registry-insecure-auth)", base.String(), what)
	}
	c := &Client{base: base, timeout: o.Timeout, retryAfter: o.DefaultRetryAfter, now: o.Now, http: o.HTTPClient, auth: auth, secrets: newSecrets(whole, split)}
	c.sellers = base.String() + "/v1/sellers/"
	c.basePath = base.EscapedPath()
	if c.http == nil {
		tr := newTransport(base, o.MaxConnsPerHost, o.TLSConfig)
		c.direct, _ = tr.(*syncTransport)
		c.http = &http.Client{Transport: tr}
	} else {
		hc := *c.http
		c.http = &hc
	}
	// Never follow a redirect: Go would send custom headers (an X-Api-Key)
	// to the new host, and a POST that moved is a configuration to fix, not
	// a row to re-send elsewhere. The 3xx itself is the answer.
	c.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c, nil
}

// newTransport answers the synchronous transport (transport.go), which
// spends less CPU per call than net/http's: no goroutine hand-offs (see
// BenchmarkRegisterTransport). It does not speak to proxies: when the
// environment names one for the base URL (HTTPS_PROXY, HTTP_PROXY,
// NO_PROXY), net/http's Transport is kept for its CONNECT tunnels and proxy
// credentials. http.ProxyFromEnvironment is what that Transport asks too,
// so both agree on whether a proxy applies; an unreadable proxy setting is
// left to net/http to report on every call.
func newTransport(base *url.URL, maxConns int, tlsConfig *tls.Config) http.RoundTripper {
	if proxy, err := http.ProxyFromEnvironment(&http.Request{URL: base}); err != nil || proxy != nil {
		return netHTTPTransport(maxConns, tlsConfig)
	}
	return newSyncTransport(base, maxConns, tlsConfig)
}

// netHTTPTransport is net/http's Transport with the pool sized like the
// synchronous one's.
func netHTTPTransport(maxConns int, tlsConfig *tls.Config) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxConnsPerHost = maxConns
	t.MaxIdleConnsPerHost = maxConns
	t.MaxIdleConns = 0
	t.IdleConnTimeout = 90 * time.Second
	if tlsConfig != nil {
		t.TLSClientConfig = tlsConfig.Clone()
	}
	return t
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Close drops idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Register registers one product for a seller under an idempotency key.
func (c *Client) Register(ctx context.Context, seller, key string, p bulkreg.Product) Result {
	return c.scrub(c.register(ctx, seller, key, p))
}

// scrub hides the client's own credentials in what an answer made it say:
// a server or proxy that echoes the request's headers in its error page or
// message would otherwise put them in Err (the logs, the dead letters) or
// in Message (the seller's reason). classify hides them in the answer
// before it cuts or quotes any of it (a secret cut in two or quoted is no
// longer found whole); this last pass covers the errors of net/http and the
// network, which quote what a server sent whole.
func (c *Client) scrub(res Result) Result {
	if len(c.secrets.forms) == 0 || (res.Err == nil && res.Message == "" && res.Code == "" && res.Field == "") {
		return res
	}
	if res.Err != nil {
		msg := res.Err.Error()
		if hidden := c.secrets.hide(msg); hidden != msg {
			res.Err = errors.New(hidden)
		}
	}
	res.Message = c.secrets.hide(res.Message)
	res.Code = c.secrets.hide(res.Code)
	res.Field = c.secrets.hide(res.Field)
	return res
}

func (c *Client) register(ctx context.Context, seller, key string, p bulkreg.Product) Result {
	if seller == "" || key == "" {
		return Result{Class: Permanent, Code: "bad_request", Failure: FailureNotSent, Err: errors.New("seller id and idempotency key must not be empty")}
	}
	// Escaping does not make ".." a harmless path segment: a proxy that
	// normalises paths would send the call (and the credentials) elsewhere.
	if err := bulkreg.ValidSellerID(seller); err != nil {
		return Result{Class: Permanent, Code: "bad_seller_id", Failure: FailureNotSent, Err: fmt.Errorf("no call made: %w", err)}
	}
	body := p.AppendJSON(make([]byte, 0, 256))
	if c.direct != nil {
		return c.registerDirect(ctx, seller, key, body)
	}
	target := c.sellers + url.PathEscape(seller) + "/products"

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return Result{Class: Permanent, Code: "bad_request", Failure: FailureNotSent, Err: fmt.Errorf("the request cannot be built: %w", err)}
	}
	// net/http resends a request carrying an Idempotency-Key on its own when
	// a pooled connection dies before the answer. That second POST would
	// have no throttle slot of its own and be missing from the call history,
	// so the body is made non-rewindable: one Register, at most one POST.
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Idempotency-Key", key)
	for _, f := range c.auth {
		req.Header.Set(f.name, f.value)
	}

	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return c.failed(Result{Latency: time.Since(start)}, parent, ctx, err)
	}
	defer resp.Body.Close()
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	res := Result{Status: resp.StatusCode, Latency: time.Since(start)}
	if readErr != nil {
		return c.failed(res, parent, ctx, readErr)
	}
	return c.classify(res, resp.Header, raw)
}

// failed is a call that got no whole answer: none at all (res.Status 0) or
// one whose body could not be read. Transient: the Idempotency-Key makes
// asking again safe.
func (c *Client) failed(res Result, parent, ctx context.Context, err error) Result {
	res.Class = Transient
	var terr error
	// A line of a malformed answer is quoted only when the error is shown:
	// with the secrets hidden before it is cut (exchange.go).
	var bad *badAnswer
	if errors.As(err, &bad) && bad.format != "" {
		bad.secrets = c.secrets
	}
	res.Failure, terr = transportError(parent, ctx, err, c.timeout)
	if res.Status == 0 {
		res.Err = terr
		return res
	}
	res.Err = fmt.Errorf("the answer %d of the registration API could not be read: %w", res.Status, terr)
	return res
}

// registerDirect is Register's call over the synchronous transport
// (exchange.go): the same request and the same reading of the answer,
// without net/http's general request and answer.
func (c *Client) registerDirect(ctx context.Context, seller, key string, body []byte) Result {
	if !validFieldValue(key) {
		return Result{Class: Permanent, Code: "bad_request", Failure: FailureNotSent, Err: fmt.Errorf("no call made: the idempotency key %q holds a control character", c.secrets.snippet([]byte(key)))}
	}
	fields := [5]field{{"Content-Type", "application/json"}, {"Accept", "application/json"}, {"Idempotency-Key", key}}
	n := 3
	n += copy(fields[n:], c.auth) // at most two: Basic auth and the auth header
	start := time.Now()
	a, err := c.direct.post(ctx, start.Add(c.timeout), requestPath(c.basePath, seller), fields[:n], body)
	res := Result{Status: a.status, Latency: time.Since(start)}
	if err != nil {
		// Said as net/http says it, so that an operator reads the same
		// error whichever way the call went.
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil {
			err = context.DeadlineExceeded // the call's own timeout
		}
		// c.sellers holds no credential (New keeps them apart).
		return c.failed(res, ctx, ctx, &url.Error{Op: "Post", URL: c.sellers + seller + "/products", Err: err})
	}
	return c.classify(res, a.header, a.body)
}

// plainProductID reads a success body written as a flat object of plain
// strings, {"product_id":"<id>","seller_sku":"<sku>",…}: no whitespace,
// escape, non-ASCII byte or value other than a string, which is the shape
// nearly every answer has (the contract's own, design.md). It reads it as
// encoding/json does (the last "product_id" wins, none gives ""), without
// its reflection: a twentieth of the client's CPU per call. A key that
// matches "product_id" only without regard to case (encoding/json would take
// it) or any other shape is not plain and goes to json.Unmarshal.
func plainProductID(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return "", false
	}
	var id []byte
	rest := raw[1 : len(raw)-1]
	for len(rest) > 0 {
		key, after, ok := plainString(rest)
		if !ok || len(after) == 0 || after[0] != ':' {
			return "", false
		}
		val, after, ok := plainString(after[1:])
		if !ok {
			return "", false
		}
		switch k := string(key); {
		case k == "product_id":
			id = val
		case strings.EqualFold(k, "product_id"):
			return "", false
		}
		if len(after) > 0 {
			if after[0] != ',' || len(after) == 1 {
				return "", false
			}
			after = after[1:]
		}
		rest = after
	}
	return string(id), true
}

// plainString reads a JSON string at the start of b that needs no
// unescaping and holds only printable ASCII, and what follows it.
func plainString(b []byte) (s, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return b[1:i], b[i+1:], true
		case c == '\\' || c < ' ' || c >= 0x7f:
			return nil, nil, false
		}
	}
	return nil, nil, false
}

func (c *Client) classify(res Result, h http.Header, raw []byte) Result {
	switch code := res.Status; {
	case code == http.StatusCreated || code == http.StatusOK:
		id, plain := plainProductID(raw)
		if !plain {
			var ok struct {
				ProductID string `json:"product_id"`
			}
			if json.Unmarshal(raw, &ok) == nil {
				id = ok.ProductID
			}
		}
		if id == "" {
			// The product may exist; asking again with the same key is safe
			// and answers 200 with the id.
			res.Class = Transient
			res.Err = fmt.Errorf("the registration API answered %d without a readable product id (%s)", code, c.secrets.snippet(raw))
			return res
		}
		res.ProductID = id
		res.Class = Registered
		if code == http.StatusOK {
			res.Class = Replayed
		}
	case code == http.StatusTooManyRequests:
		res.Class = RateLimited
		res.RetryAfter = c.parseRetryAfter(h.Get("Retry-After"))
		c.apiError(&res, raw)
		res.Scope = ScopeSeller
		switch v := strings.ToLower(strings.TrimSpace(h.Get(ScopeHeader))); {
		case v == string(ScopeApp), v == "" && res.Code == "app_rate_limited":
			res.Scope = ScopeApp
			res.Err = fmt.Errorf("the registration API refused the application's rate, all sellers together (429); retry after %v", res.RetryAfter)
		default:
			res.Err = fmt.Errorf("the registration API refused the seller's rate (429); retry after %v", res.RetryAfter)
		}
	case code >= 300 && code < 400:
		// Not followed (see New): the registry URL is not the API's.
		res.Class = Misconfigured
		res.Err = fmt.Errorf("the registration API answered a redirect (%d) to %q; redirects are not followed: set the registry URL to the final address", code, redactLocation(c.secrets.hide(h.Get("Location"))))
	case code == http.StatusUnauthorized || code == http.StatusForbidden || code == http.StatusProxyAuthRequired:
		res.Class = Misconfigured
		c.apiError(&res, raw)
		res.Err = fmt.Errorf("the registration API refused bulkreg's credentials (%d %s: %s): check the user and password in the registry URL (BULKREG_REGISTRY_URL) or the registry auth header (BULKREG_REGISTRY_AUTH_HEADER), and the key's rights",
			code, http.StatusText(code), c.describe(res, raw))
	case code == http.StatusMethodNotAllowed || (code == http.StatusNotFound && !contractError(raw)):
		// A 404 in the contract's JSON is an answer about the row or the
		// seller; any other 404 (a server's or proxy's page) says the route
		// does not exist at this URL.
		res.Class = Misconfigured
		c.apiError(&res, raw)
		res.Err = fmt.Errorf("the registration API has no registration route at %s (%d %s: %s): check the registry URL (BULKREG_REGISTRY_URL)",
			c.base.String(), code, http.StatusText(code), c.describe(res, raw))
	case code == http.StatusRequestTimeout || code >= 500:
		res.Class = Transient
		c.apiError(&res, raw)
		res.Err = fmt.Errorf("the registration API answered %d %s: %s", code, http.StatusText(code), c.describe(res, raw))
	case code >= 400:
		res.Class = Permanent
		c.apiError(&res, raw)
		if res.Code == "" {
			res.Code = "http_" + strconv.Itoa(code)
		}
		res.Err = fmt.Errorf("the registration API refused the row (%d): %s", code, c.describe(res, raw))
	default:
		res.Class = Transient
		res.Err = fmt.Errorf("the registration API answered an unexpected %d: %s", code, c.secrets.snippet(raw))
	}
	return res
}

// parseRetryAfter reads both forms of RFC 9110: delay-seconds or an HTTP-date.
// The answer is at least minRetryAfter: the API speaks whole seconds, and a
// "0" or a date already past still means the seller was refused just now.
func (c *Client) parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return c.retryAfter
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return c.retryAfter
		}
		// A day is far beyond any sane answer; cap it so arithmetic cannot overflow.
		return max(time.Duration(min(secs, 86400))*time.Second, minRetryAfter)
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(min(at.Sub(c.now()), 24*time.Hour), minRetryAfter)
	}
	return c.retryAfter
}

// minRetryAfter is the shortest block a 429 causes.
const minRetryAfter = time.Second

// apiError reads the contract's error body into res, the client's
// credentials hidden in what it says.
func (c *Client) apiError(res *Result, raw []byte) {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil {
		res.Code, res.Message, res.Field = c.secrets.hide(body.Error.Code), c.secrets.hide(body.Error.Message), c.secrets.hide(body.Error.Field)
	}
}

// contractError reports whether raw is the contract's error body, an object
// whose "error" names a code: the API's own answer, not a server's page.
func contractError(raw []byte) bool {
	var body struct {
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal(raw, &body) == nil && body.Error != nil && body.Error.Code != ""
}

func (c *Client) describe(res Result, raw []byte) string {
	if res.Message != "" {
		s := res.Message
		if res.Field != "" {
			s = res.Field + ": " + s
		}
		if res.Code != "" {
			s += " [" + res.Code + "]"
		}
		return s
	}
	return c.secrets.snippet(raw)
}

// transportError says why a call got no whole answer: the Failure a seller
// reads, and the error for operators.
func transportError(parent, ctx context.Context, err error, timeout time.Duration) (Failure, error) {
	var ne net.Error
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		return FailureCancelled, fmt.Errorf("the call was cancelled before the registration API answered: %w", err)
	case errors.Is(parent.Err(), context.DeadlineExceeded):
		return FailureCancelled, fmt.Errorf("the caller's deadline passed before the registration API answered: %w", err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return FailureTimeout, fmt.Errorf("no answer from the registration API within %v: %w", timeout, err)
	case errors.As(err, new(*badAnswer)), malformedForNetHTTP(err):
		return FailureUnreadable, fmt.Errorf("the registration API answered in a form bulkreg cannot read as HTTP/1.1: %w", err)
	case tlsFailure(err):
		return FailureTLS, fmt.Errorf("the TLS handshake with the registration API failed: %w", err)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return FailureClosed, fmt.Errorf("the registration API closed the connection before answering: %w", err)
	default:
		return FailureUnreachable, fmt.Errorf("the registration API cannot be reached: %w", err)
	}
}

// malformedForNetHTTP reports net/http's error for an answer that is not
// HTTP/1.x (it has no type of its own).
func malformedForNetHTTP(err error) bool {
	return strings.Contains(err.Error(), "malformed HTTP")
}

// tlsFailure reports an error of the TLS handshake: a certificate not
// verified, an alert from the server, a record that is not TLS.
func tlsFailure(err error) bool {
	var (
		verify *tls.CertificateVerificationError
		record tls.RecordHeaderError
		alert  tls.AlertError
		ua     x509.UnknownAuthorityError
		host   x509.HostnameError
		inv    x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &alert) ||
		errors.As(err, &ua) || errors.As(err, &host) || errors.As(err, &inv)
}

// redactLocation shows a redirect target without its query or credentials,
// which may carry tokens.
func redactLocation(loc string) string {
	u, err := url.Parse(loc)
	if err != nil {
		return "an unreadable address"
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}

package httpapi

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/bulkreg/bulkreg"
)

// MinSecretLen is the shortest HS256 secret accepted: shorter keys can be
// brute-forced from one captured token.
const MinSecretLen = 32

// Defaults of the claims every token must carry.
const (
	// DefaultIssuer is the "iss" required when none is configured.
	DefaultIssuer = "bulkreg"
	// DefaultAudience is the "aud" required when none is configured.
	DefaultAudience = "bulkreg-uploads"
	// DefaultMaxLifetime caps exp − now (and exp − iat): a stolen token is
	// worth a day at most.
	DefaultMaxLifetime = 24 * time.Hour
)

// Auth checks bearer tokens. A seller's token names the seller in "sub" and
// is verified with the seller keys only; an operator's token carries
// "role": "operator" and is verified with the operator keys only, so whoever
// can mint sellers' tokens cannot mint an operator's. Every token must carry
// the configured "iss" and "aud" and an "exp" at most MaxLifetime ahead.
// Accepted algorithms: HS256 with a shared secret, RS256 and EdDSA with a
// public key; the algorithm must match the kind of key ("alg": "none" and
// an HS256 token "signed" with a public key are refused).
type Auth struct {
	// Secret is the HS256 secret of sellers' tokens (at least MinSecretLen bytes); empty: none.
	Secret []byte
	// PublicKeys verify sellers' RS256 (*rsa.PublicKey) and EdDSA
	// (ed25519.PublicKey) tokens; see LoadPublicKeys.
	PublicKeys []crypto.PublicKey
	// OperatorSecret is the HS256 secret of operators' tokens; it must differ from Secret.
	OperatorSecret []byte
	// OperatorPublicKeys verify operators' RS256 and EdDSA tokens.
	OperatorPublicKeys []crypto.PublicKey
	// Issuer is the required "iss"; empty means DefaultIssuer.
	Issuer string
	// Audience must be one of the token's "aud"; empty means DefaultAudience.
	Audience string
	// MaxLifetime caps how far ahead "exp" may be (and exp − iat); 0 means DefaultMaxLifetime.
	MaxLifetime time.Duration
	// Leeway is the clock skew allowed on exp, nbf and iat. A used sign-in
	// link stays spent past exp by three times as much (LinkSpentUntil).
	Leeway time.Duration
}

// Errors of Seller and Operator. Their messages are what a client is told;
// the wrapped details (which claim, which library check) are for logs.
var (
	ErrNoToken  = errors.New("not signed in: send Authorization: Bearer <token>, or sign in with a sign-in link")
	ErrBadToken = errors.New("the bearer token is not valid")
	// ErrExpired is a valid token past its "exp" (it also wraps ErrBadToken).
	ErrExpired = fmt.Errorf("%w: it has expired; get a new one", ErrBadToken)
	// ErrNotOperator is a valid seller's token sent to an operator endpoint.
	ErrNotOperator = errors.New("an operator's token is needed")
)

// PublicMessage is what a client is told about a token error: a sentence
// without library internals.
func PublicMessage(err error) string {
	switch {
	case errors.Is(err, ErrNoToken):
		return ErrNoToken.Error()
	case errors.Is(err, ErrExpired):
		return ErrExpired.Error()
	case errors.Is(err, ErrNotOperator):
		return ErrNotOperator.Error()
	}
	return ErrBadToken.Error()
}

// RoleOperator is the "role" claim of an operator's token: it may read the
// compliance report of every seller, and no seller's uploads.
const RoleOperator = "operator"

type claims struct {
	jwt.RegisteredClaims
	Role string `json:"role,omitempty"`
	// Purpose is PurposeSignIn in a sign-in link's token and empty in a
	// bearer token: each is accepted only where it belongs.
	Purpose string `json:"purpose,omitempty"`
}

// PurposeSignIn is the "purpose" claim of a sign-in link's token. Only such
// a token opens a session at /signin, and it is never a bearer token: a
// short-lived bearer token must not become an 8-hour session, and a link,
// which travels through mail and browser history, must not call the API.
const PurposeSignIn = "signin"

func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", ErrNoToken
	}
	return strings.TrimSpace(tok), nil
}

// Seller returns the seller id the request's token names.
func (a Auth) Seller(r *http.Request) (string, error) {
	tok, err := bearer(r)
	if err != nil {
		return "", err
	}
	return a.Verify(tok)
}

// Operator checks that the request's token is an operator's and returns
// the operator's name.
func (a Auth) Operator(r *http.Request) (string, error) {
	tok, err := bearer(r)
	if err != nil {
		return "", err
	}
	c, err := a.verify(tok, a.OperatorSecret, a.OperatorPublicKeys)
	if err != nil {
		if _, serr := a.verify(tok, a.Secret, a.PublicKeys); serr == nil {
			return "", fmt.Errorf("%w: the token is signed with a seller key", ErrNotOperator)
		}
		return "", err
	}
	if c.Role != RoleOperator {
		return "", fmt.Errorf("%w: claim role is %q, want %q", ErrNotOperator, c.Role, RoleOperator)
	}
	return c.Subject, nil
}

// Verify checks a seller's token and returns the seller id it names.
func (a Auth) Verify(tok string) (string, error) {
	c, err := a.verify(tok, a.Secret, a.PublicKeys)
	if err != nil {
		return "", err
	}
	if c.Role != "" {
		return "", fmt.Errorf("%w: a %q token does not name a seller", ErrBadToken, c.Role)
	}
	if c.Purpose != "" {
		return "", fmt.Errorf("%w: a token with purpose %q is not a bearer token (a sign-in link's token opens a session in the browser, once)", ErrBadToken, c.Purpose)
	}
	if err := bulkreg.ValidSellerID(c.Subject); err != nil {
		return "", fmt.Errorf("%w: claim sub: %w", ErrBadToken, err)
	}
	return c.Subject, nil
}

func (a Auth) issuer() string {
	if a.Issuer != "" {
		return a.Issuer
	}
	return DefaultIssuer
}

func (a Auth) audience() string {
	if a.Audience != "" {
		return a.Audience
	}
	return DefaultAudience
}

func (a Auth) maxLifetime() time.Duration {
	if a.MaxLifetime > 0 {
		return a.MaxLifetime
	}
	return DefaultMaxLifetime
}

// verify checks tok against one set of keys: the secret for HS256, the
// public keys for RS256 and EdDSA.
func (a Auth) verify(tok string, secret []byte, public []crypto.PublicKey) (*claims, error) {
	var rsaKeys, edKeys []jwt.VerificationKey
	for _, k := range public {
		switch k := k.(type) {
		case *rsa.PublicKey:
			rsaKeys = append(rsaKeys, k)
		case ed25519.PublicKey:
			edKeys = append(edKeys, k)
		}
	}
	var methods []string
	if len(secret) >= MinSecretLen {
		methods = append(methods, jwt.SigningMethodHS256.Alg())
	}
	if len(rsaKeys) > 0 {
		methods = append(methods, jwt.SigningMethodRS256.Alg())
	}
	if len(edKeys) > 0 {
		methods = append(methods, jwt.SigningMethodEdDSA.Alg())
	}
	if len(methods) == 0 {
		return nil, fmt.Errorf("%w: the server has no key configured for this kind of token", ErrBadToken)
	}
	c := &claims{}
	keyFunc := func(t *jwt.Token) (any, error) {
		// WithValidMethods has already refused any other algorithm; each
		// algorithm gets only its own kind of key.
		switch t.Method.Alg() {
		case jwt.SigningMethodHS256.Alg():
			return secret, nil
		case jwt.SigningMethodRS256.Alg():
			return jwt.VerificationKeySet{Keys: rsaKeys}, nil
		case jwt.SigningMethodEdDSA.Alg():
			return jwt.VerificationKeySet{Keys: edKeys}, nil
		}
		return nil, fmt.Errorf("algorithm %q is not accepted", t.Method.Alg())
	}
	_, err := jwt.ParseWithClaims(tok, c, keyFunc,
		jwt.WithValidMethods(methods),
		jwt.WithExpirationRequired(),
		jwt.WithIssuer(a.issuer()),
		jwt.WithAudience(a.audience()),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(a.Leeway),
	)
	if errors.Is(err, jwt.ErrTokenExpired) {
		return nil, fmt.Errorf("%w (%w)", ErrExpired, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	exp := c.ExpiresAt.Time
	if life := time.Until(exp); life > a.maxLifetime()+a.Leeway {
		return nil, fmt.Errorf("%w: it is valid for %s more, at most %s is accepted", ErrBadToken, life.Round(time.Second), a.maxLifetime())
	}
	if c.IssuedAt != nil && exp.Sub(c.IssuedAt.Time) > a.maxLifetime() {
		return nil, fmt.Errorf("%w: its lifetime (exp − iat) is %s, at most %s is accepted", ErrBadToken, exp.Sub(c.IssuedAt.Time), a.maxLifetime())
	}
	if strings.TrimSpace(c.Subject) == "" {
		return nil, fmt.Errorf("%w: it names no one (claim sub is empty)", ErrBadToken)
	}
	return c, nil
}

// SignInLink is a sign-in link's token that VerifyLink accepted.
type SignInLink struct {
	Seller string
	// ID is the token id (claim jti): spending it is what makes the link
	// work once.
	ID string
	// Expires is the token's "exp".
	Expires time.Time
	// SpentUntil is how long the mark of a used link must be kept
	// (SessionStore.SpendLink): see Auth.LinkSpentUntil.
	SpentUntil time.Time
}

// LinkSpentUntil is when the spent mark of a sign-in link expiring at exp
// may go. The verifier accepts the token until exp + Leeway by its own
// clock, and each replica's clock is held within Leeway of true time, so
// two replicas differ by up to 2 × Leeway: the replica that set the mark
// may run Leeway ahead (its mark's expiry, a relative TTL, falls Leeway
// early in true time) while another runs Leeway behind (it accepts the
// token until exp + 2 × Leeway of true time). exp + 3 × Leeway covers
// both; one more second covers the time between reading the clock and
// Redis setting the mark's expiry. A mark that outlives every
// verifier's acceptance is the only way a link works once: derived from
// Leeway here, it cannot fall behind the verifier when Leeway changes.
func (a Auth) LinkSpentUntil(exp time.Time) time.Time {
	return exp.Add(3*a.Leeway + time.Second)
}

// VerifyLink checks the token of a sign-in link: a seller's token (as
// Verify) with "purpose": "signin" (PurposeSignIn: a bearer token, however
// short-lived, opens no session), a token id ("jti", so it can be used
// once), valid for at most maxAge more: a link travels through mail and
// browser history, so it must not be worth a long-lived token.
func (a Auth) VerifyLink(tok string, maxAge time.Duration) (SignInLink, error) {
	c, err := a.verify(tok, a.Secret, a.PublicKeys)
	if err != nil {
		return SignInLink{}, err
	}
	if c.Role != "" {
		return SignInLink{}, fmt.Errorf("%w: a %q token does not name a seller", ErrBadToken, c.Role)
	}
	if err := bulkreg.ValidSellerID(c.Subject); err != nil {
		return SignInLink{}, fmt.Errorf("%w: claim sub: %w", ErrBadToken, err)
	}
	if c.Purpose != PurposeSignIn {
		return SignInLink{}, fmt.Errorf("%w: a sign-in link's token needs claim purpose %q, got %q (a bearer token does not open a session)", ErrBadToken, PurposeSignIn, c.Purpose)
	}
	if c.ID == "" {
		return SignInLink{}, fmt.Errorf("%w: a sign-in link's token needs a token id (claim jti)", ErrBadToken)
	}
	exp := c.ExpiresAt.Time
	if life := time.Until(exp); life > maxAge+a.Leeway {
		return SignInLink{}, fmt.Errorf("%w: a sign-in link may be valid for %s at most, this one for %s", ErrBadToken, maxAge, life.Round(time.Second))
	}
	return SignInLink{Seller: c.Subject, ID: c.ID, Expires: exp, SpentUntil: a.LinkSpentUntil(exp)}, nil
}

// Minter signs HS256 tokens, for local use and demos: the operator runs
// `producer token` with the same secret, issuer and audience as serve.
type Minter struct {
	Secret      []byte
	Issuer      string        // empty: DefaultIssuer
	Audience    string        // empty: DefaultAudience
	MaxLifetime time.Duration // a longer ttl is refused; 0: DefaultMaxLifetime
}

// Seller signs a seller's token valid for ttl.
func (m Minter) Seller(seller string, ttl time.Duration, now time.Time) (string, error) {
	if err := bulkreg.ValidSellerID(seller); err != nil {
		return "", fmt.Errorf("no token for this seller: %w", err)
	}
	return m.mint(seller, "", "", ttl, now)
}

// Operator signs an operator's token (GET /v1/compliance) valid for ttl.
// Sign it with the operator secret: serve checks operators' tokens with that
// key only.
func (m Minter) Operator(name string, ttl time.Duration, now time.Time) (string, error) {
	if err := bulkreg.ValidSellerID(name); err != nil {
		// The same format keeps an operator's name harmless in logs.
		return "", fmt.Errorf("no token for this operator name: %w", err)
	}
	return m.mint(name, RoleOperator, "", ttl, now)
}

func (m Minter) mint(subject, role, purpose string, ttl time.Duration, now time.Time) (string, error) {
	if len(m.Secret) < MinSecretLen {
		return "", fmt.Errorf("the signing secret has %d bytes, at least %d are needed", len(m.Secret), MinSecretLen)
	}
	a := Auth{Issuer: m.Issuer, Audience: m.Audience, MaxLifetime: m.MaxLifetime}
	if ttl <= 0 {
		return "", fmt.Errorf("token lifetime %s: must be greater than 0", ttl)
	}
	if ttl > a.maxLifetime() {
		return "", fmt.Errorf("token lifetime %s: at most %s is accepted by the upload service", ttl, a.maxLifetime())
	}
	c := claims{RegisteredClaims: jwt.RegisteredClaims{
		ID:        rand.Text(), // lets a sign-in link be used once
		Subject:   subject,
		Issuer:    a.issuer(),
		Audience:  jwt.ClaimStrings{a.audience()},
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}, Role: role, Purpose: purpose}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(m.Secret)
}

// Link returns a sign-in link for the seller, valid for ttl: base (the
// service's public URL) + /signin?token=…, whose token carries "purpose":
// "signin". Opening it signs the seller in to the pages, once; its token is
// not a bearer token.
func (m Minter) Link(base, seller string, ttl time.Duration, now time.Time) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Not the URL itself: a malformed one may carry a password that
		// url.URL.Redacted cannot find.
		return "", errors.New("the service's public URL is not an http or https URL with a host, such as https://uploads.example.com")
	}
	if err := bulkreg.ValidSellerID(seller); err != nil {
		return "", fmt.Errorf("no sign-in link for this seller: %w", err)
	}
	tok, err := m.mint(seller, "", PurposeSignIn, ttl, now)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/signin"
	u.RawQuery = url.Values{"token": {tok}}.Encode()
	return u.String(), nil
}

// MintToken signs a seller's token with the default issuer and audience.
func MintToken(secret []byte, seller string, ttl time.Duration, now time.Time) (string, error) {
	return Minter{Secret: secret}.Seller(seller, ttl, now)
}

// MintOperatorToken signs an operator's token with the default issuer and
// audience; secret must be the operator secret.
func MintOperatorToken(secret []byte, name string, ttl time.Duration, now time.Time) (string, error) {
	return Minter{Secret: secret}.Operator(name, ttl, now)
}

// LoadPublicKeys reads the public keys of a file: PEM ("PUBLIC KEY",
// "RSA PUBLIC KEY" or "CERTIFICATE" blocks, any number), or a JWKS document
// ({"keys": [...]}, RSA and Ed25519 "OKP" keys). Other key types are refused,
// naming the entry.
func LoadPublicKeys(path string) ([]crypto.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read public keys: %w", err)
	}
	var keys []crypto.PublicKey
	if t := strings.TrimSpace(string(data)); strings.HasPrefix(t, "{") {
		keys, err = parseJWKS([]byte(t))
	} else {
		keys, err = parsePEMKeys(data)
	}
	if err != nil {
		return nil, fmt.Errorf("public keys in %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("public keys in %s: the file holds no key", path)
	}
	return keys, nil
}

func parsePEMKeys(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for i := 1; ; i++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return keys, nil
		}
		var k any
		var err error
		switch b.Type {
		case "PUBLIC KEY":
			k, err = x509.ParsePKIXPublicKey(b.Bytes)
		case "RSA PUBLIC KEY":
			k, err = x509.ParsePKCS1PublicKey(b.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(b.Bytes); err == nil {
				k = cert.PublicKey
			}
		default:
			return nil, fmt.Errorf("PEM block %d is a %q; want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE (never a private key)", i, b.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", i, err)
		}
		pk, err := acceptKey(k)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", i, err)
		}
		keys = append(keys, pk)
	}
}

func acceptKey(k any) (crypto.PublicKey, error) {
	switch k := k.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("the RSA key has %d bits, at least 2048 are needed", k.N.BitLen())
		}
		return k, nil
	case ed25519.PublicKey:
		return k, nil
	}
	return nil, fmt.Errorf("a %T key is not accepted; use RSA (RS256) or Ed25519 (EdDSA)", k)
}

func parseJWKS(data []byte) ([]crypto.PublicKey, error) {
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Crv string `json:"crv"`
			Use string `json:"use"`
			N   string `json:"n"`
			E   string `json:"e"`
			X   string `json:"x"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS document: %w", err)
	}
	var keys []crypto.PublicKey
	for i, j := range set.Keys {
		if j.Use != "" && j.Use != "sig" {
			continue
		}
		var k any
		switch {
		case j.Kty == "RSA":
			n, err1 := base64.RawURLEncoding.DecodeString(j.N)
			e, err2 := base64.RawURLEncoding.DecodeString(j.E)
			if err := errors.Join(err1, err2); err != nil || len(e) == 0 || len(e) > 4 {
				return nil, fmt.Errorf("key %d: n and e must be base64url numbers", i+1)
			}
			k = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		case j.Kty == "OKP" && j.Crv == "Ed25519":
			x, err := base64.RawURLEncoding.DecodeString(j.X)
			if err != nil || len(x) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("key %d: x must be a base64url Ed25519 key of %d bytes", i+1, ed25519.PublicKeySize)
			}
			k = ed25519.PublicKey(x)
		default:
			return nil, fmt.Errorf("key %d: kty %q (crv %q) is not accepted; use RSA or OKP/Ed25519", i+1, j.Kty, j.Crv)
		}
		pk, err := acceptKey(k)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		keys = append(keys, pk)
	}
	return keys, nil
}

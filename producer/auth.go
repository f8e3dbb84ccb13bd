package producer

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MinSecretLen is the shortest HS256 secret accepted: shorter keys can be
// brute-forced from one captured token.
const MinSecretLen = 32

// Auth identifies the seller of a request from its bearer token: a JWT
// signed with HS256 and the shared secret, whose "sub" is the seller id and
// which must carry "exp". Any other algorithm, "none" included, is refused.
type Auth struct {
	Secret []byte
	Leeway time.Duration // clock skew allowed on exp/nbf/iat
}

// Errors of Seller, so the HTTP layer can tell the client which it was.
var (
	ErrNoToken  = errors.New("no bearer token: send Authorization: Bearer <token>")
	ErrBadToken = errors.New("the bearer token is not valid")
)

// Seller returns the seller id the request's token names.
func (a Auth) Seller(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", ErrNoToken
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", ErrNoToken
	}
	return a.Verify(strings.TrimSpace(tok))
}

// RoleOperator is the "role" claim of an operator's token: it may read the
// compliance report of every seller, and no seller's uploads.
const RoleOperator = "operator"

type claims struct {
	jwt.RegisteredClaims
	Role string `json:"role,omitempty"`
}

// Operator checks that the request's token is an operator's.
func (a Auth) Operator(r *http.Request) error {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return ErrNoToken
	}
	c, err := a.verify(strings.TrimSpace(tok))
	if err != nil {
		return err
	}
	if c.Role != RoleOperator {
		return fmt.Errorf("%w: an operator's token is needed (claim role = %q)", ErrBadToken, RoleOperator)
	}
	return nil
}

// Verify checks a seller's token and returns its subject.
func (a Auth) Verify(tok string) (string, error) {
	c, err := a.verify(tok)
	if err != nil {
		return "", err
	}
	if c.Role != "" {
		return "", fmt.Errorf("%w: a %s token does not name a seller", ErrBadToken, c.Role)
	}
	return c.Subject, nil
}

func (a Auth) verify(tok string) (*claims, error) {
	if len(a.Secret) < MinSecretLen {
		return nil, fmt.Errorf("%w: the server has no signing secret configured", ErrBadToken)
	}
	claims := &claims{}
	_, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return a.Secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(a.Leeway),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	if strings.TrimSpace(claims.Subject) == "" {
		return nil, fmt.Errorf("%w: it names no seller (claim sub is empty)", ErrBadToken)
	}
	return claims, nil
}

// MintToken signs a token for seller valid for ttl, for local use and demos.
func MintToken(secret []byte, seller string, ttl time.Duration, now time.Time) (string, error) {
	return mint(secret, seller, "", ttl, now)
}

// MintOperatorToken signs an operator's token (GET /v1/compliance).
func MintOperatorToken(secret []byte, name string, ttl time.Duration, now time.Time) (string, error) {
	return mint(secret, name, RoleOperator, ttl, now)
}

func mint(secret []byte, seller, role string, ttl time.Duration, now time.Time) (string, error) {
	if len(secret) < MinSecretLen {
		return "", fmt.Errorf("the signing secret has %d bytes, at least %d are needed", len(secret), MinSecretLen)
	}
	if strings.TrimSpace(seller) == "" {
		return "", errors.New("no seller id to put in the token")
	}
	if ttl <= 0 {
		return "", fmt.Errorf("token lifetime %s: must be greater than 0", ttl)
	}
	claims := claims{RegisteredClaims: jwt.RegisteredClaims{
		Subject:   seller,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}, Role: role}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

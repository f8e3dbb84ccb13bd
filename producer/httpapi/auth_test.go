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
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// keys of the asymmetric tests, made once: RSA key generation is slow.
type testKeys struct {
	rsa   *rsa.PrivateKey
	ed    ed25519.PrivateKey
	opRSA *rsa.PrivateKey
}

func newTestKeys(t *testing.T) testKeys {
	t.Helper()
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	op, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return testKeys{rsa: r, ed: ed, opRSA: op}
}

func writePEM(t *testing.T, keys ...crypto.PublicKey) string {
	t.Helper()
	var out []byte
	for _, k := range keys {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	p := filepath.Join(t.TempDir(), "keys.pem")
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeJWKS(t *testing.T, r *rsa.PublicKey, ed ed25519.PublicKey) string {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	doc := map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "r1", "use": "sig", "alg": "RS256", "n": b64(r.N.Bytes()), "e": b64(big.NewInt(int64(r.E)).Bytes())},
		{"kty": "OKP", "crv": "Ed25519", "kid": "e1", "x": b64(ed)},
		{"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"}, // an encryption key: skipped
	}}
	b, _ := json.Marshal(doc)
	p := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func signed(t *testing.T, m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sellerClaims(sub string, now time.Time, extra jwt.MapClaims) jwt.MapClaims {
	c := jwt.MapClaims{"sub": sub, "iss": "https://market.example", "aud": []string{"other", "bulkreg"},
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

func TestAuthAsymmetricKeysAndClaims(t *testing.T) {
	k := newTestKeys(t)
	edPub := k.ed.Public().(ed25519.PublicKey)
	for _, src := range []struct{ name, path string }{
		{"PEM", writePEM(t, &k.rsa.PublicKey, edPub)},
		{"JWKS", writeJWKS(t, &k.rsa.PublicKey, edPub)},
	} {
		t.Run(src.name, func(t *testing.T) {
			pub, err := LoadPublicKeys(src.path)
			if err != nil {
				t.Fatal(err)
			}
			if len(pub) != 2 {
				t.Fatalf("loaded %d keys, want 2 (RSA and Ed25519)", len(pub))
			}
			opPub := []crypto.PublicKey{&k.opRSA.PublicKey}
			a := Auth{PublicKeys: pub, OperatorPublicKeys: opPub, Issuer: "https://market.example", Audience: "bulkreg", Leeway: time.Second}
			now := time.Now()
			rsaPubDER, _ := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
			cases := []struct {
				name   string
				tok    string
				seller string // "" = refused
			}{
				{"RS256", signed(t, jwt.SigningMethodRS256, k.rsa, sellerClaims("seller-1", now, nil)), "seller-1"},
				{"EdDSA", signed(t, jwt.SigningMethodEdDSA, k.ed, sellerClaims("seller-2", now, nil)), "seller-2"},
				{"RS256 by another key", signed(t, jwt.SigningMethodRS256, k.opRSA, sellerClaims("seller-1", now, nil)), ""},
				{"HS256 keyed with the public key (algorithm confusion)", signed(t, jwt.SigningMethodHS256, rsaPubDER, sellerClaims("seller-1", now, nil)), ""},
				{"HS256 when no secret is configured", signed(t, jwt.SigningMethodHS256, secret, sellerClaims("seller-1", now, nil)), ""},
				{"no iss", signed(t, jwt.SigningMethodRS256, k.rsa, sellerClaims("seller-1", now, jwt.MapClaims{"iss": nil})), ""},
				{"wrong iss", signed(t, jwt.SigningMethodRS256, k.rsa, sellerClaims("seller-1", now, jwt.MapClaims{"iss": "https://evil.example"})), ""},
				{"no aud", signed(t, jwt.SigningMethodRS256, k.rsa, sellerClaims("seller-1", now, jwt.MapClaims{"aud": nil})), ""},
				{"wrong aud", signed(t, jwt.SigningMethodRS256, k.rsa, sellerClaims("seller-1", now, jwt.MapClaims{"aud": "billing"})), ""},
				{"ten years", signed(t, jwt.SigningMethodRS256, k.rsa, sellerClaims("seller-1", now, jwt.MapClaims{"exp": now.AddDate(10, 0, 0).Unix()})), ""},
				{"25 hours ahead, no iat", signed(t, jwt.SigningMethodEdDSA, k.ed, sellerClaims("seller-1", now, jwt.MapClaims{"iat": nil, "exp": now.Add(25 * time.Hour).Unix()})), ""},
				{"exp − iat of 30 days, issued long ago", signed(t, jwt.SigningMethodEdDSA, k.ed, sellerClaims("seller-1", now, jwt.MapClaims{"iat": now.AddDate(0, 0, -29).Unix(), "exp": now.Add(time.Hour).Unix()})), ""},
				{"23 hours", signed(t, jwt.SigningMethodEdDSA, k.ed, sellerClaims("seller-1", now, jwt.MapClaims{"exp": now.Add(23 * time.Hour).Unix()})), "seller-1"},
				{"issued in the future", signed(t, jwt.SigningMethodEdDSA, k.ed, sellerClaims("seller-1", now, jwt.MapClaims{"iat": now.Add(time.Hour).Unix()})), ""},
				{"seller ..", signed(t, jwt.SigningMethodRS256, k.rsa, sellerClaims("..", now, nil)), ""},
				{"seller a/b", signed(t, jwt.SigningMethodRS256, k.rsa, sellerClaims("a/b", now, nil)), ""},
				{"seller with a newline", signed(t, jwt.SigningMethodRS256, k.rsa, sellerClaims("a\nb", now, nil)), ""},
				{"operator token signed with the operator key", signed(t, jwt.SigningMethodRS256, k.opRSA, sellerClaims("ops", now, jwt.MapClaims{"role": RoleOperator})), ""},
			}
			for _, c := range cases {
				got, err := a.Verify(c.tok)
				if got != c.seller || (c.seller == "") != (err != nil) {
					t.Errorf("%s: Verify = %q, %v; want %q", c.name, got, err, c.seller)
				}
				if err != nil && !errors.Is(err, ErrBadToken) {
					t.Errorf("%s: error %v does not wrap ErrBadToken", c.name, err)
				}
			}

			// Operators: only the operator key, and only with the role.
			opCases := []struct {
				name string
				tok  string
				ok   bool
				err  error
			}{
				{"operator key and role", signed(t, jwt.SigningMethodRS256, k.opRSA, sellerClaims("ops", now, jwt.MapClaims{"role": RoleOperator})), true, nil},
				{"seller key with the operator role", signed(t, jwt.SigningMethodRS256, k.rsa, sellerClaims("ops", now, jwt.MapClaims{"role": RoleOperator})), false, ErrNotOperator},
				{"operator key without the role", signed(t, jwt.SigningMethodRS256, k.opRSA, sellerClaims("ops", now, nil)), false, ErrNotOperator},
				{"seller's token", signed(t, jwt.SigningMethodEdDSA, k.ed, sellerClaims("seller-1", now, nil)), false, ErrNotOperator},
				{"operator key, wrong audience", signed(t, jwt.SigningMethodRS256, k.opRSA, sellerClaims("ops", now, jwt.MapClaims{"role": RoleOperator, "aud": "x"})), false, ErrBadToken},
			}
			for _, c := range opCases {
				r := httptest.NewRequest("GET", "/v1/compliance", nil)
				r.Header.Set("Authorization", "Bearer "+c.tok)
				_, err := a.Operator(r)
				if (err == nil) != c.ok || (c.err != nil && !errors.Is(err, c.err)) {
					t.Errorf("%s: Operator = %v, want ok=%v err %v", c.name, err, c.ok, c.err)
				}
			}
		})
	}
}

// An operator's token minted with the sellers' secret is refused, even
// though it carries the operator role: the operator key is separate.
func TestOperatorTokenSignedWithSellerSecretIsRefused(t *testing.T) {
	a := Auth{Secret: secret, OperatorSecret: operatorSecret}
	now := time.Now()
	forged, err := MintOperatorToken(secret, "mallory", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/v1/compliance", nil)
	r.Header.Set("Authorization", "Bearer "+forged)
	if _, err := a.Operator(r); !errors.Is(err, ErrNotOperator) {
		t.Errorf("operator token signed with the seller secret: %v, want ErrNotOperator", err)
	}
	if _, err := a.Verify(forged); err == nil {
		t.Error("an operator-role token passed as a seller's")
	}
	good, _ := MintOperatorToken(operatorSecret, "ops", time.Hour, now)
	r.Header.Set("Authorization", "Bearer "+good)
	if name, err := a.Operator(r); err != nil || name != "ops" {
		t.Errorf("operator token signed with the operator secret: %q, %v", name, err)
	}
	if _, err := a.Verify(good); err == nil {
		t.Error("an operator's token passed as a seller's")
	}
}

func TestMintRefuses(t *testing.T) {
	now := time.Now()
	m := Minter{Secret: secret, MaxLifetime: 24 * time.Hour}
	for _, id := range []string{"..", "a/b", "a\nb", "", strings.Repeat("x", 65)} {
		if _, err := m.Seller(id, time.Hour, now); err == nil {
			t.Errorf("minted a token for seller %q", id)
		}
	}
	if _, err := m.Seller("s", 25*time.Hour, now); err == nil {
		t.Error("minted a token past the lifetime cap")
	}
	if _, err := m.Seller("s", 0, now); err == nil {
		t.Error("minted a token with no lifetime")
	}
	if _, err := (Minter{Secret: []byte("short")}).Seller("s", time.Hour, now); err == nil {
		t.Error("minted with a short secret")
	}
	tok, err := Minter{Secret: secret, Issuer: "i", Audience: "a"}.Seller("s", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (Auth{Secret: secret}).Verify(tok); err == nil {
		t.Error("a token for issuer i / audience a passed a server expecting the defaults")
	}
	if s, err := (Auth{Secret: secret, Issuer: "i", Audience: "a"}).Verify(tok); err != nil || s != "s" {
		t.Errorf("Verify = %q, %v", s, err)
	}
}

// What a client is told about a refused token is a plain sentence, never
// the library's wording or the claim values.
func TestTokenErrorsArePlain(t *testing.T) {
	a := Auth{Secret: secret}
	now := time.Now()
	expired := signed(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "s", "iss": DefaultIssuer, "aud": DefaultAudience, "exp": now.Add(-time.Hour).Unix()})
	for _, tok := range []string{"garbage", "a.b.c", expired, signed(t, jwt.SigningMethodHS512, secret, jwt.MapClaims{"sub": "s"})} {
		_, err := a.Verify(tok)
		msg := PublicMessage(err)
		if err == nil || strings.Contains(msg, "malformed") || strings.Contains(msg, "claims") || strings.Contains(msg, "signature") || strings.Contains(msg, "malformed") || strings.Contains(msg, "HS512") {
			t.Errorf("token %.20q: public message %q (err %v)", tok, msg, err)
		}
	}
	if _, err := a.Verify(expired); PublicMessage(err) != ErrExpired.Error() {
		t.Errorf("expired token: %q, want %q", PublicMessage(err), ErrExpired)
	}
}

func TestLoadPublicKeysRefuses(t *testing.T) {
	dir := t.TempDir()
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	der, _ := x509.MarshalPKIXPublicKey(&small.PublicKey)
	priv, _ := x509.MarshalPKCS8PrivateKey(small)
	files := map[string][]byte{
		"empty":      nil,
		"private":    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv}),
		"small rsa":  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
		"jwks ec":    []byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}`),
		"jwks bad n": []byte(`{"keys":[{"kty":"RSA","n":"!!","e":"AQAB"}]}`),
	}
	for name, b := range files {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		os.WriteFile(p, b, 0o600)
		if keys, err := LoadPublicKeys(p); err == nil {
			t.Errorf("%s: loaded %d keys, want an error", name, len(keys))
		}
	}
	if _, err := LoadPublicKeys(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file loaded")
	}
}

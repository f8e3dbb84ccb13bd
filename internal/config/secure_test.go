package config

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/bulkreg/bulkreg/internal/redisproc"
	"github.com/bulkreg/bulkreg/internal/testredis"
)

// A secret from the environment is used but never printed: not by -h, not
// by the usage a bad flag prints.
func TestSecretsAreNeverPrinted(t *testing.T) {
	env := map[string]string{"BULKREG_REDIS_PASSWORD": "pw-redis-81d3", "BULKREG_KAFKA_PASSWORD": "pw-kafka-27c4",
		"BULKREG_KAFKA_USERNAME": "u", "BULKREG_KAFKA_SASL_MECHANISM": "plain"}
	var out bytes.Buffer
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(&out)
	c := Default()
	b := NewBinder(fs, func(k string) string { return env[k] })
	c.Bind(b)
	if err := fs.Parse([]string{"--bogus"}); err == nil {
		t.Fatal("--bogus parsed")
	}
	fs.PrintDefaults()
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if c.RedisPassword != "pw-redis-81d3" || c.KafkaPassword != "pw-kafka-27c4" {
		t.Errorf("secrets not read from the environment: %q %q", c.RedisPassword, c.KafkaPassword)
	}
	for _, v := range []string{"pw-redis-81d3", "pw-kafka-27c4"} {
		if strings.Contains(out.String(), v) {
			t.Errorf("a secret is printed:\n%s", out.String())
		}
	}
	if !strings.Contains(out.String(), "-redis-password") || !strings.Contains(out.String(), "never printed") {
		t.Errorf("the usage does not list the secret's flag:\n%s", out.String())
	}
	if err := fs.Parse([]string{"--redis-password", "from-flag"}); err != nil || c.RedisPassword != "from-flag" {
		t.Errorf("the flag does not override the environment: %q %v", c.RedisPassword, err)
	}
}

func TestSecuritySettingsAreChecked(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, []byte("not a certificate"), 0o600)
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"BULKREG_KAFKA_SASL_MECHANISM": "gssapi"}, "--kafka-sasl-mechanism"},
		{map[string]string{"BULKREG_KAFKA_USERNAME": "u"}, "--kafka-sasl-mechanism"},
		{map[string]string{"BULKREG_REDIS_USERNAME": "u"}, "--redis-password"},
		{map[string]string{"BULKREG_REDIS_TLS_CA_FILE": ca}, "--redis-tls-ca-file"},
		{map[string]string{"BULKREG_KAFKA_TLS": "true", "BULKREG_KAFKA_TLS_CA_FILE": ca}, "holds no PEM certificate"},
		{map[string]string{"BULKREG_REGISTRY_URL": "ftp://u:pw-url-secret@host"}, "xxxxx"},
	}
	for _, c := range cases {
		_, err := parse(t, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "pw-url-secret") {
			t.Errorf("env %v: err = %v, want it to name %s", c.env, err, c.want)
		}
	}
	for _, m := range []string{"plain", "SCRAM-SHA-256", "scram-sha-512"} {
		if _, err := parse(t, map[string]string{"BULKREG_KAFKA_SASL_MECHANISM": m, "BULKREG_KAFKA_USERNAME": "u", "BULKREG_KAFKA_PASSWORD": "p"}); err != nil {
			t.Errorf("mechanism %s: %v", m, err)
		}
	}
}

// testCA makes a CA and a certificate for 127.0.0.1 signed by it, and
// writes the CA, the certificate and its key as PEM files.
func testCA(t *testing.T) (caFile, certFile, keyFile string, cert tls.Certificate) {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bulkreg test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile, certFile, keyFile = write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", der), write("key.pem", "EC PRIVATE KEY", keyDER)
	cert, err = tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return caFile, certFile, keyFile, cert
}

// Redis with requirepass, an ACL user and TLS, through the client every
// command uses.
func TestRedisPasswordUserAndTLS(t *testing.T) {
	ctx := context.Background()
	caFile, certFile, keyFile, _ := testCA(t)
	tlsPort, err := redisproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := testredis.Start(t, "--requirepass", "pw-default-3e1", "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "no")
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "pw-default-3e1"})
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "bulkreg", "on", ">pw-user-5a9", "~bulkreg:*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	tlsAddr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	cases := []struct {
		name string
		c    Config
		ok   bool
	}{
		{"requirepass", Config{RedisAddrs: []string{srv.Addr}, RedisPassword: "pw-default-3e1"}, true},
		{"ACL user", Config{RedisAddrs: []string{srv.Addr}, RedisUsername: "bulkreg", RedisPassword: "pw-user-5a9"}, true},
		{"TLS with the CA file", Config{RedisAddrs: []string{tlsAddr}, RedisPassword: "pw-default-3e1", RedisTLS: true, RedisTLSCA: caFile}, true},
		{"no password", Config{RedisAddrs: []string{srv.Addr}}, false},
		{"wrong password", Config{RedisAddrs: []string{srv.Addr}, RedisPassword: "nope"}, false},
		{"TLS with the system's CAs", Config{RedisAddrs: []string{tlsAddr}, RedisPassword: "pw-default-3e1", RedisTLS: true}, false},
		{"plain TCP to the TLS port", Config{RedisAddrs: []string{tlsAddr}, RedisPassword: "pw-default-3e1"}, false},
	}
	for _, c := range cases {
		rdb := c.c.RedisClient()
		err := rdb.Set(ctx, "bulkreg:k", c.name, time.Minute).Err()
		if err == nil {
			// A script, as the throttle and the upload status run them.
			err = rdb.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"bulkreg:k"}).Err()
		}
		rdb.Close()
		if (err == nil) != c.ok {
			t.Errorf("%s: err = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

// Kafka SASL (PLAIN and SCRAM) and TLS: a writer with KafkaTransport and a
// reader with KafkaDialer talk to a broker that requires them.
func TestKafkaSASLAndTLS(t *testing.T) {
	caFile, _, _, cert := testCA(t)
	cases := []struct {
		name      string
		mechanism string
		kfakeName string
		tls       bool
	}{
		{"plain", "plain", "PLAIN", false},
		{"scram-sha-256", "scram-sha-256", "SCRAM-SHA-256", false},
		{"scram-sha-512 over TLS", "scram-sha-512", "SCRAM-SHA-512", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.EnableSASL(), kfake.Superuser(c.kfakeName, "bulkreg", "pw-kafka-6f2")}
			if c.tls {
				opts = append(opts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
			}
			cl, err := kfake.NewCluster(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			cfg := Config{KafkaBrokers: cl.ListenAddrs(), KafkaSASLMechanism: c.mechanism, KafkaUsername: "bulkreg", KafkaPassword: "pw-kafka-6f2",
				KafkaTLS: c.tls, KafkaTLSCA: map[bool]string{true: caFile}[c.tls]}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w := &kafka.Writer{Addr: kafka.TCP(cfg.KafkaBrokers...), Topic: "t", Transport: cfg.KafkaTransport(), BatchTimeout: time.Millisecond, MaxAttempts: 1}
			defer w.Close()
			if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("hello")}); err != nil {
				t.Fatalf("write with SASL: %v", err)
			}
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: cfg.KafkaBrokers, Topic: "t", Partition: 0, Dialer: cfg.KafkaDialer(), MaxWait: 50 * time.Millisecond})
			defer r.Close()
			m, err := r.ReadMessage(ctx)
			if err != nil || string(m.Value) != "hello" {
				t.Fatalf("read with SASL: %q %v", m.Value, err)
			}

			bad := cfg
			bad.KafkaPassword = "wrong"
			wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer wcancel()
			wb := &kafka.Writer{Addr: kafka.TCP(bad.KafkaBrokers...), Topic: "t", Transport: bad.KafkaTransport(), BatchTimeout: time.Millisecond, MaxAttempts: 1}
			defer wb.Close()
			if err := wb.WriteMessages(wctx, kafka.Message{Value: []byte("x")}); err == nil {
				t.Error("a wrong SASL password wrote")
			}
		})
	}
}

// A malformed --registry-url must not print its password in the usage
// error: url.Parse reads "http//user:pw@host" as a path, and
// url.URL.Redacted finds no password there. No usage error or -h of a URL
// setting holds the password, however the URL is malformed.
func TestMalformedURLsKeepTheirPassword(t *testing.T) {
	const pw = "pw-9c2e71"
	for _, raw := range []string{
		"http//user:" + pw + "@registry.example.com",
		"http:/user:" + pw + "@registry.example.com",
		"http:user:" + pw + "@registry.example.com",
		"user:" + pw + "@registry.example.com",
		"http://user:" + pw + "@",
		"http://user:" + pw + "%zz@registry.example.com",
		"http://user:p w" + pw + "@registry.example.com",
		"ftp://user:" + pw + "@registry.example.com",
		" https://user:" + pw + "@registry.example.com",
	} {
		if got := Redacted(raw); strings.Contains(got, pw) {
			t.Errorf("Redacted(%q) = %q, holds the password", raw, got)
		}
		for _, how := range []string{"env", "flag"} {
			var env map[string]string
			var args []string
			if how == "env" {
				env = map[string]string{"BULKREG_REGISTRY_URL": raw}
			} else {
				args = []string{"--registry-url", raw}
			}
			_, err := parse(t, env, args...)
			if err == nil || !strings.Contains(err.Error(), "--registry-url (BULKREG_REGISTRY_URL)") {
				t.Errorf("%s %q: err = %v, want a usage error naming --registry-url", how, raw, err)
			} else if strings.Contains(err.Error(), pw) {
				t.Errorf("%s %q: the usage error holds the password: %v", how, raw, err)
			}
		}
	}
	// What is well formed keeps working, the scheme in any case.
	for _, raw := range []string{"https://user:" + pw + "@registry.example.com/base", "HTTPS://registry.example.com", "http://127.0.0.1:8081"} {
		if _, err := parse(t, map[string]string{"BULKREG_REGISTRY_URL": raw}); err != nil {
			t.Errorf("%q: %v", raw, err)
		}
		if got := Redacted(raw); strings.Contains(got, pw) {
			t.Errorf("Redacted(%q) = %q, holds the password", raw, got)
		}
	}
}

// A Redis or Kafka address written as a URL with credentials
// (redis://:secret@host:6379) is refused naming the flag: the address
// settings take host:port, the password has a setting of its own. Neither
// the refusal nor -h shows the password.
func TestAddressesWithCredentialsAreRefused(t *testing.T) {
	const pw = "pw-addr-4b1e9d"
	for _, tt := range []struct{ env, flag, value string }{
		{"BULKREG_REDIS_ADDRS", "--redis-addrs", "redis://:" + pw + "@redis.internal:6379"},
		{"BULKREG_REDIS_ADDRS", "--redis-addrs", "localhost:6379,rediss://default:" + pw + "@redis.internal:6380"},
		{"BULKREG_REDIS_ADDRS", "--redis-addrs", "default:" + pw + "@redis.internal:6379"},
		{"BULKREG_KAFKA_BROKERS", "--kafka-brokers", "kafka://user:" + pw + "@kafka.internal:9092"},
	} {
		_, err := parse(t, map[string]string{tt.env: tt.value})
		if err == nil || !strings.Contains(err.Error(), tt.flag) {
			t.Errorf("%s=%s: err = %v, want a refusal naming %s", tt.env, tt.value, err, tt.flag)
		} else if strings.Contains(err.Error(), pw) {
			t.Errorf("%s: the refusal shows the password: %v", tt.env, err)
		}
		var out bytes.Buffer
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(&out)
		c := Default()
		c.Bind(NewBinder(fs, func(k string) string { return map[string]string{tt.env: tt.value}[k] }))
		fs.PrintDefaults()
		if strings.Contains(out.String(), pw) {
			t.Errorf("%s: -h shows the password:\n%s", tt.env, out.String())
		}
	}
}

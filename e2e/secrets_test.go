package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testbin"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestNoSecretInAnyOutput runs the whole stack as separate processes with
// credentials everywhere: a registry URL with a user and password (the
// sandbox requires them as Basic auth), a Redis password, a JWT secret, and
// the consumer sends an auth header (--registry-auth-header) too. An
// upload of 30 rows has 2 rows the API keeps answering 503, 2 whose
// connections it closes without an answer (both kinds dead-lettered after
// their attempts) and 1 it refuses for its content. Then every output is
// read whole and searched for each secret, in plain text and as the Basic
// credentials' base64: every process's log, `producer status` (text and
// JSON), the dead-letter and rows topics (values and headers), every Redis
// key's value, the JSON answers, the pages and the reports (every part of
// the xlsx unzipped) in Korean and English. The API's received requests
// carry the password in the Authorization header only, the auth header's
// value in its own header only. What a seller reads
// carries no internal address either: not the registry's host:port, no
// "http://", no dial error.
//
// Its waits are generous (they end as soon as what they wait for holds): it
// may run on a busy machine beside other tests.
func TestNoSecretInAnyOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs for about 20 s")
	}
	const (
		regUser      = "svc"
		regPassword  = "S3cr3tPw-8e1d4"
		redisPass    = "redisPw-5c27a19f"
		jwtSecret    = "jwtSecret-0d9b3e7a51c84f26a7e1b3d5c9f0"
		apiKeyName   = "X-Api-Key"
		apiKey       = "apiKey-6b1f0c93d2e7a845"
		seller       = "seller-secrets"
		rows         = 30
		attempts     = 3
		deadLettered = 4 // 2 answered 503, 2 dropped
	)
	basic := base64.StdEncoding.EncodeToString([]byte(regUser + ":" + regPassword))
	secrets := map[string]string{"registry password": regPassword, "registry Basic credentials": basic,
		"Redis password": redisPass, "JWT secret": jwtSecret, "registry auth header's value": apiKey}

	began := time.Now()
	bin := testbin.Build(t, "producer", "consumer", "registry-sandbox")
	t.Logf("built in %v", time.Since(began).Round(time.Millisecond))
	topic := bulkreg.DefaultTopic
	brokers := testkafka.Start(t, 2, topic, bulkreg.DLQTopic(topic))
	rs := testredis.Start(t, "--requirepass", redisPass)
	addrs := freeAddrs(t, 4)
	registry, metrics, public, admin := addrs[0], addrs[1], addrs[2], addrs[3]
	env := stackEnv(brokers, rs.Addr, registry, 3*time.Second,
		"BULKREG_REGISTRY_URL=http://"+regUser+":"+regPassword+"@"+registry,
		"BULKREG_REDIS_PASSWORD="+redisPass, "BULKREG_JWT_SECRET="+jwtSecret, "BULKREG_LOG_LEVEL=debug",
		"BULKREG_PUBLIC_URL=http://"+public)

	var procs []*proc
	procs = append(procs, start(t, filepath.Join(bin, "registry-sandbox"), "registry-sandbox",
		append(env, "BULKREG_LISTEN="+registry, "BULKREG_BASIC_AUTH="+regUser+":"+regPassword, "BULKREG_KEEP_REQUESTS=10000")))
	testwait.For(t, 30*time.Second, "the sandbox answers /healthz", func() bool {
		resp, err := http.Get("http://" + registry + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	var clis []run
	cli := func(args ...string) run {
		r := producerCLI(t, bin, env, args...)
		clis = append(clis, r)
		return r
	}
	if r := cli("redis-init"); r.code != 0 {
		t.Fatalf("producer redis-init: exit %d\n%s", r.code, r.stderr)
	}
	procs = append(procs, start(t, filepath.Join(bin, "consumer"), "consumer", append(env, "BULKREG_METRICS_ADDR="+metrics,
		"BULKREG_REGISTRY_INSECURE_AUTH=true", "BULKREG_REGISTRY_AUTH_HEADER="+apiKeyName+": "+apiKey,
		// Short: the throttle holds a call that got no answer (a dropped row's) for this long before its retry.
		"BULKREG_REGISTRY_TIMEOUT=1s", "BULKREG_HEARTBEAT_INTERVAL=1s",
		"BULKREG_RETRY_INITIAL=100ms", "BULKREG_RETRY_MAX_INTERVAL=300ms", "BULKREG_RETRY_MAX_ELAPSED=30s",
		"BULKREG_RETRY_MAX_ATTEMPTS="+strconv.Itoa(attempts))))
	procs = append(procs, start(t, filepath.Join(bin, "producer"), "producer-serve",
		append(env, "BULKREG_ADDR="+public, "BULKREG_ADMIN_ADDR="+admin), "serve"))
	testkafka.WaitGroupStable(t, brokers, "bulkreg-registrar", 1, 30*time.Second)
	testwait.For(t, 30*time.Second, "the upload service answers /healthz", func() bool {
		resp, err := http.Get("http://" + admin + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})

	chaos := sandbox.Chaos{SKUs: []string{"S-007", "S-019"}, DropSKUs: []string{"S-011", "S-023"}, RefuseNameContaining: "S-027"}
	body, _ := json.Marshal(chaos)
	req, _ := http.NewRequest(http.MethodPut, "http://"+registry+"/admin/chaos", bytes.NewReader(body))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT /admin/chaos: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	sheet := make([]sheetRow, rows)
	for i := range sheet {
		sheet[i] = sheetRow{fmt.Sprintf("S-%03d", i+1), strconv.Itoa(1000 + i)}
	}
	up := cli("upload", "--seller", seller, writeSheet(t, "secrets.xlsx", sheet))
	if up.code != 0 {
		t.Fatalf("upload: exit %d\n%s", up.code, up.stderr)
	}
	id := strings.TrimSpace(up.stdout)

	// Not fatal: whatever state the rows reach, every output is searched.
	var st uploadstatus.Status
	deadline := time.Now().Add(120 * time.Second)
	for st = statusOf(t, bin, env, id); !st.Done() && time.Now().Before(deadline); st = statusOf(t, bin, env, id) {
		time.Sleep(250 * time.Millisecond)
	}
	if st.Registered != rows-deadLettered-1 || st.Failed != deadLettered+1 {
		t.Errorf("upload: %d registered, %d failed (done %v), want %d and %d", st.Registered, st.Failed, st.Done(), rows-deadLettered-1, deadLettered+1)
	}
	// The seller reads what happened to a dropped row, in words (rows 12
	// and 24 hold S-011 and S-023, under the header).
	for _, r := range st.Rows {
		if (r.Row == 12 || r.Row == 24) && !strings.Contains(r.Reason, "the marketplace closed the connection without answering") {
			t.Errorf("row %d's reason %q does not say the connection closed", r.Row, r.Reason)
		}
	}

	t.Logf("upload done %v after the start", time.Since(began).Round(time.Millisecond))

	// What a seller reads: the status, the JSON answers, the pages, the reports.
	type output struct {
		name   string
		data   []byte
		seller bool // also free of any internal address
	}
	var outs []output
	add := func(name string, data []byte, seller bool) { outs = append(outs, output{name, data, seller}) }
	for _, args := range [][]string{{"status", id}, {"status", "--json", id}} {
		r := cli(args...)
		add("producer "+strings.Join(args, " "), []byte(r.stdout), true)
	}
	token := strings.TrimSpace(cli("token", "--seller", seller).stdout)
	get := func(c *http.Client, url string, hdr ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second) // the event stream of a done upload ends at once
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			return nil
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || (err != nil && ctx.Err() == nil) {
			t.Errorf("GET %s: %s %v", url, resp.Status, err)
		}
		return b
	}
	base := "http://" + public
	auth := []string{"Authorization", "Bearer " + token}
	for _, lang := range []string{"ko", "en"} {
		for _, path := range []string{"/v1/uploads/" + id, "/v1/uploads", "/v1/uploads/" + id + "/events"} {
			add("GET "+path+" "+lang, get(http.DefaultClient, base+path+"?lang="+lang, append(auth, "Accept-Language", lang)...), true)
		}
		for _, q := range []string{"", "&failed_only=true"} {
			add("report "+lang+q, get(http.DefaultClient, base+"/v1/uploads/"+id+"/report.xlsx?lang="+lang+q, auth...), true)
		}
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	link := strings.TrimSpace(cli("token", "--seller", seller, "--link").stdout)
	signin := get(browser, link)
	add("sign-in", signin, true)
	// The link shows a page; its button (a same-origin POST of the form's
	// hidden fields) signs in.
	_, form, _ := strings.Cut(string(signin), `action="/signin" id="signin">`)
	form, _, _ = strings.Cut(form, "</form>")
	fields := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`).FindAllStringSubmatch(form, -1) {
		fields.Set(m[1], html.UnescapeString(m[2]))
	}
	if fields.Get("token") == "" {
		t.Errorf("the sign-in page has no button posting the link's token:\n%.1500s", signin)
	}
	req, _ = http.NewRequest(http.MethodPost, "http://"+public+"/signin", strings.NewReader(fields.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+public)
	if resp, err := browser.Do(req); err != nil {
		t.Errorf("POST /signin: %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		add("sign-in button", b, true)
	}
	for _, lang := range []string{"ko", "en"} {
		for _, path := range []string{"/uploads", "/uploads/" + id, "/upload"} {
			add("page "+path+" "+lang, get(browser, base+path+"?lang="+lang), true)
		}
	}

	for _, o := range outs {
		if o.name == "page /uploads/"+id+" ko" && !bytes.Contains(o.data, []byte("마켓이 답하기 전에 연결을 끊음")) {
			t.Errorf("the Korean page does not say in Korean that the connection closed")
		}
	}

	// What operators read and what is stored: the DLQ, Redis, the logs.
	letters, detailed := 0, 0
	for _, tp := range []string{topic, bulkreg.DLQTopic(topic)} {
		for _, m := range readTopic(t, brokers[0], tp, 2) {
			var b bytes.Buffer
			b.Write(m.Key)
			b.Write(m.Value)
			for _, h := range m.Headers {
				fmt.Fprintf(&b, "\n%s: %s", h.Key, h.Value)
			}
			add(fmt.Sprintf("%s offset %d/%d", tp, m.Partition, m.Offset), b.Bytes(), false)
			if tp != topic {
				letters++
				// Operators still read the detail, the address included.
				for _, h := range m.Headers {
					if h.Key == "bulkreg-error-message" && strings.Contains(string(h.Value), "closed the connection") && strings.Contains(string(h.Value), registry) {
						detailed++
					}
				}
			}
		}
	}
	if letters != deadLettered || detailed != 2 {
		t.Errorf("%d dead letters, %d of them naming the dropped connection and the API's address; want %d and 2", letters, detailed, deadLettered)
	}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, Password: redisPass})
	defer rdb.Close()
	keys := 0
	for k, v := range redisValues(t, rdb) {
		add("redis "+k, v, false)
		keys++
	}
	for _, p := range procs {
		add("log of "+p.name, []byte(p.out.String()), false)
	}
	for i, r := range clis {
		add(fmt.Sprintf("CLI run %d", i), []byte(r.stdout+r.stderr), false)
	}

	for _, o := range outs {
		texts := [][]byte{o.data}
		if bytes.HasPrefix(o.data, []byte("PK")) {
			texts = append(texts, unzipped(t, o.name, o.data)...)
		}
		for _, text := range texts {
			for what, s := range secrets {
				if n := bytes.Count(text, []byte(s)); n > 0 {
					t.Errorf("%s holds the %s %d times: %s", o.name, what, n, around(text, s))
				}
			}
			if !o.seller {
				continue
			}
			for _, internal := range []string{registry, "http://127.0.0.1", "dial tcp", `Post "`} {
				if bytes.Contains(text, []byte(internal)) {
					t.Errorf("%s, which a seller reads, holds the internal %q: %s", o.name, internal, around(text, internal))
				}
			}
		}
	}

	// The API got the credentials as Basic auth, and nowhere else.
	var reqs []sandbox.Request
	if err := getJSON("http://"+registry+"/admin/requests", &reqs); err != nil {
		t.Fatal(err)
	}
	registrations := 0
	for i, r := range reqs {
		if strings.HasPrefix(r.Target, "/admin/") || r.Target == "/healthz" {
			continue
		}
		if r.Method == http.MethodPost {
			registrations++
		}
		if got := r.Header.Get("Authorization"); got != "Basic "+basic {
			t.Errorf("request %d (%s %s): Authorization %q, want the URL's user and password as Basic auth", i, r.Method, r.Target, got)
		}
		if r.Method == http.MethodPost {
			if got := r.Header.Get(apiKeyName); got != apiKey {
				t.Errorf("request %d (%s %s): %s %q, want the auth header's value", i, r.Method, r.Target, apiKeyName, got)
			}
		}
		h := r.Header.Clone()
		h.Del("Authorization")
		h.Del(apiKeyName)
		hb, _ := json.Marshal(h)
		for _, where := range []string{r.Target, r.Host, r.Body, string(hb)} {
			for _, s := range []string{regPassword, basic, regUser + ":", apiKey} {
				if strings.Contains(where, s) {
					t.Errorf("request %d (%s %s) carries %q outside its Authorization header: %q", i, r.Method, r.Target, s, where)
				}
			}
		}
	}
	if want := rows - 1 + deadLettered*(attempts-1); registrations < want {
		t.Errorf("the API received %d registrations, want at least %d", registrations, want)
	}
	t.Logf("outputs searched %v after the start", time.Since(began).Round(time.Millisecond))
	t.Logf("searched %d outputs (%d Redis keys, %d dead letters, %d log lines of the consumer) and %d requests to the API (%d registrations)",
		len(outs), keys, letters, strings.Count(procs[1].out.String(), "\n"), len(reqs), registrations)
}

// readTopic reads every message of topic's partitions, from the first.
func readTopic(t *testing.T, broker, topic string, partitions int) []kafka.Message {
	t.Helper()
	var out []kafka.Message
	for p := range partitions {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		conn, err := kafka.DialLeader(ctx, "tcp", broker, topic, p)
		if err != nil {
			cancel()
			t.Fatalf("dial %s/%d: %v", topic, p, err)
		}
		first, last, err := conn.ReadOffsets()
		if err != nil {
			t.Fatalf("offsets of %s/%d: %v", topic, p, err)
		}
		for next := first; next < last; {
			if _, err := conn.Seek(next, kafka.SeekAbsolute); err != nil {
				t.Fatalf("seek %s/%d to %d: %v", topic, p, next, err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
			batch := conn.ReadBatch(1, 10<<20)
			for {
				m, err := batch.ReadMessage()
				if err != nil {
					break
				}
				out = append(out, m)
				next = m.Offset + 1
			}
			if err := batch.Close(); err != nil && next < last {
				t.Fatalf("read %s/%d at %d: %v", topic, p, next, err)
			}
		}
		conn.Close()
		cancel()
	}
	return out
}

// redisValues reads every key's value whole, each type by its own
// commands (uncompressed, unlike DUMP's LZF), and its DUMP too, in
// pipelines of a thousand keys (a Redis prepared by redis-init holds a
// marker per hash slot).
func redisValues(t *testing.T, rdb *redis.Client) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	out := make(map[string][]byte, len(keys))
	for len(keys) > 0 {
		batch := keys[:min(1000, len(keys))]
		keys = keys[len(batch):]
		types := make([]*redis.StatusCmd, len(batch))
		pipe := rdb.Pipeline()
		for i, k := range batch {
			types[i] = pipe.Type(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		vals := make([]redis.Cmder, len(batch))
		dumps := make([]*redis.StringCmd, len(batch))
		pipe = rdb.Pipeline()
		for i, k := range batch {
			switch typ := types[i].Val(); typ {
			case "string":
				vals[i] = pipe.Get(ctx, k)
			case "hash":
				vals[i] = pipe.HGetAll(ctx, k)
			case "list":
				vals[i] = pipe.LRange(ctx, k, 0, -1)
			case "set":
				vals[i] = pipe.SMembers(ctx, k)
			case "zset":
				vals[i] = pipe.ZRangeWithScores(ctx, k, 0, -1)
			case "stream":
				vals[i] = pipe.XRange(ctx, k, "-", "+")
			case "none": // expired since the scan
			default:
				t.Errorf("redis key %s has the type %s, which the test cannot read", k, typ)
			}
			dumps[i] = pipe.Dump(ctx, k)
		}
		_, _ = pipe.Exec(ctx) // a key gone since the scan answers nil
		for i, k := range batch {
			var b bytes.Buffer
			b.WriteString(k + "\n")
			if vals[i] != nil {
				fmt.Fprintf(&b, "%v\n", vals[i])
			}
			b.WriteString(dumps[i].Val())
			out[k] = b.Bytes()
		}
	}
	return out
}

// unzipped is every part of a zip (an xlsx) inflated.
func unzipped(t *testing.T, name string, data []byte) [][]byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Errorf("%s is not a zip: %v", name, err)
		return nil
	}
	var out [][]byte
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Errorf("%s: %s: %v", name, f.Name, err)
			continue
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		out = append(out, b)
	}
	return out
}

// around shows where s is in text.
func around(text []byte, s string) string {
	i := bytes.Index(text, []byte(s))
	from, to := max(0, i-150), min(len(text), i+len(s)+100)
	return strconv.Quote(string(text[from:to]))
}

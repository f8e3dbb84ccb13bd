package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testbin"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/redrive"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// The tests in this file run the circuit breaker end to end, every part a
// separate process: the sandbox registry (its outage switched on and off
// through PUT/DELETE /admin/outage), four consumers and the producer CLI,
// with real Redis and the embedded broker. Windows and budgets are shrunk:
// 100 registrations per 2 s, a row gives up after 4 attempts.

// world is one test's processes and their settings.
type world struct {
	t        *testing.T
	bin      string
	brokers  []string
	redis    *testredis.Server
	registry string   // host:port of the sandbox
	env      []string // settings every command reads
	metrics  []string // each consumer's /metrics address
}

const circuitWindow = 2 * time.Second

// circuitMargin is the margin of the circuit tests' stack, the bench's.
// When the circuit closes after an outage, every seller's next 100 slots
// are free at once: 400 calls, which a machine shared by four consumers,
// the sandbox and the broker delays by tens of milliseconds on their way to
// the sandbox. Slots are settled after their answers (ARCHITECTURE.md, "A
// counted call's slot moves to a margin before its answer"), so the margin
// need not cover that delay's spread, only the allowed lateness.
const circuitMargin = 100 * time.Millisecond

// startWorld starts Kafka (4 partitions), Redis, the sandbox and four
// consumers with the given extra consumer settings.
func startWorld(t *testing.T, consumerEnv ...string) *world {
	t.Helper()
	began := time.Now()
	w := &world{t: t, bin: testbin.Build(t, "producer", "consumer", "registry-sandbox")}
	built := time.Now()
	topic := bulkreg.DefaultTopic
	w.brokers = testkafka.Start(t, 4, topic, bulkreg.DLQTopic(topic))
	w.redis = testredis.Start(t)
	addrs := freeAddrs(t, 5)
	w.registry = addrs[0]
	w.env = stackEnv(w.brokers, w.redis.Addr, w.registry, circuitWindow, "BULKREG_POLL_INTERVAL=100ms",
		"BULKREG_MARGIN="+circuitMargin.String())
	startSandbox(t, w.bin, w.env, w.registry)
	for i := range 4 {
		addr := addrs[1+i]
		w.metrics = append(w.metrics, addr)
		env := append(append([]string{}, w.env...), "BULKREG_METRICS_ADDR="+addr, "BULKREG_HEARTBEAT_INTERVAL=1s", "BULKREG_REGISTRY_TIMEOUT=2s",
			"BULKREG_CIRCUIT_WINDOW="+circuitWindow.String(), "BULKREG_CIRCUIT_PROBE_LEASE=3s")
		start(t, filepath.Join(w.bin, "consumer"), fmt.Sprintf("consumer-%d", i+1), append(env, consumerEnv...))
	}
	testkafka.WaitGroupStable(t, w.brokers, "bulkreg-registrar", 4, 30*time.Second)
	t.Logf("built in %v, the four consumers in a stable group %v later", built.Sub(began).Round(time.Millisecond), time.Since(built).Round(time.Millisecond))
	return w
}

// outage switches the sandbox's outage: on (a JSON body) or off (body "").
func (w *world) outage(body string) sandbox.OutageReport {
	w.t.Helper()
	method := http.MethodPut
	if body == "" {
		method = http.MethodDelete
	}
	req, err := http.NewRequest(method, "http://"+w.registry+"/admin/outage", strings.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r sandbox.OutageReport
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&r) != nil {
		w.t.Fatalf("%s /admin/outage %s: %s", method, body, resp.Status)
	}
	return r
}

// refused is what the sandbox's outage refused so far.
func (w *world) refused() sandbox.OutageReport {
	w.t.Helper()
	var r sandbox.OutageReport
	if err := getJSON("http://"+w.registry+"/admin/outage", &r); err != nil {
		w.t.Fatal(err)
	}
	return r
}

func (w *world) audit(seller string) sandbox.SellerAudit {
	w.t.Helper()
	var a sandbox.Audit
	if err := getJSON("http://"+w.registry+"/audit", &a); err != nil {
		w.t.Fatal(err)
	}
	return a.Sellers[seller]
}

// circuit reads the fleet's circuit breaker as the consumers share it.
func (w *world) circuit() circuit.Status {
	w.t.Helper()
	b, err := circuit.New(w.redis.Client(), circuit.Settings{})
	if err != nil {
		w.t.Fatal(err)
	}
	st, err := b.Peek(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	return st
}

// deadLetters reads the whole dead-letter topic.
func (w *world) deadLetters() []redrive.Letter {
	w.t.Helper()
	sc, err := redrive.Scan(context.Background(), redrive.ScanOptions{Brokers: w.brokers, Topic: bulkreg.DLQTopic(bulkreg.DefaultTopic), ReadTimeout: 5 * time.Second}, redrive.Filter{})
	if err != nil {
		w.t.Fatal(err)
	}
	return sc.Letters
}

// upload publishes a sheet of n rows for seller (SKUs <prefix>-001…) and returns the upload id.
func (w *world) upload(seller, prefix string, n int) string {
	w.t.Helper()
	rows := make([]sheetRow, n)
	for i := range rows {
		rows[i] = sheetRow{fmt.Sprintf("%s-%03d", prefix, i+1), strconv.Itoa(1000 + i)}
	}
	r := producerCLI(w.t, w.bin, w.env, "upload", "--seller", seller, writeSheet(w.t, seller+".xlsx", rows))
	if r.code != 0 || !strings.Contains(r.stderr, fmt.Sprintf("%d rows published", n)) {
		w.t.Fatalf("upload for %s: exit %d, %s", seller, r.code, r.stderr)
	}
	return strings.TrimSpace(r.stdout)
}

// sellersOnEveryPartition picks n seller ids whose rows land on n different
// partitions, as the producer's hash balancer puts them, so each of n
// consumers holds rows.
func sellersOnEveryPartition(n int) []string {
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	var out []string
	taken := map[int]bool{}
	for i := 0; len(out) < n; i++ {
		s := fmt.Sprintf("seller-%d", i)
		if p := (&kafka.Hash{}).Balance(kafka.Message{Key: []byte(s)}, parts...); !taken[p] {
			taken[p] = true
			out = append(out, s)
		}
	}
	return out
}

// metric reads one unlabelled series from a consumer's /metrics.
func metric(t *testing.T, addr, name string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	return v, err == nil
}

// TestOutageThenRecovery: four sellers upload 300 rows each (one seller per
// partition, so each of the four consumers holds rows); after 600 rows the
// registration API answers 503 to everything for 10 s, more than three times
// a row's retry budget (4 attempts within 3 s), then recovers. Every row is
// registered exactly once, none is dead-lettered, no 429; while the API is
// down the fleet sends at most one probe per probe interval, and the sellers'
// status says the marketplace is not answering instead of counting failures.
func TestOutageThenRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs for about 30 s")
	}
	const (
		rows     = 300
		down     = 10 * time.Second
		probeMin = 500 * time.Millisecond
	)
	w := startWorld(t, "BULKREG_RETRY_INITIAL=100ms", "BULKREG_RETRY_MAX_INTERVAL=1s", "BULKREG_RETRY_MAX_ELAPSED=3s", "BULKREG_RETRY_MAX_ATTEMPTS=4",
		"BULKREG_CIRCUIT_PROBE_MIN="+probeMin.String(), "BULKREG_CIRCUIT_PROBE_MAX=2s")
	sellers := sellersOnEveryPartition(4)
	ids := make([]string, len(sellers))
	var wg sync.WaitGroup
	for i, s := range sellers {
		wg.Go(func() { ids[i] = w.upload(s, "SKU", rows) })
	}
	wg.Wait()
	t.Logf("uploads published")
	registered := func() int {
		n := 0
		for _, s := range sellers {
			n += w.audit(s).Products
		}
		return n
	}
	testwait.For(t, 20*time.Second, "600 rows registered", func() bool { return registered() >= 600 })

	w.outage(`{"all": true}`)
	wentDown := time.Now()
	before := registered()
	var open circuit.Status
	testwait.For(t, 8*time.Second, "the circuit opens", func() bool {
		open = w.circuit()
		return open.State != circuit.Closed
	})
	openedAt := open.Now.Add(-open.OpenFor)
	t.Logf("the API went down after %d rows; the circuit opened %v later", before, openedAt.Sub(wentDown).Round(time.Millisecond))

	// The seller's view while the API is down: waiting, not failed.
	time.Sleep(time.Second)
	st := producerCLI(t, w.bin, w.env, "status", ids[0])
	if !strings.Contains(st.stdout, upload.NotAnswering) || !strings.Contains(st.stdout, " 0 failed") {
		t.Errorf("producer status during the outage says:\n%s\nwant %q and 0 failed", st.stdout, upload.NotAnswering)
	}
	var view upload.UploadView
	if r := producerCLI(t, w.bin, w.env, "status", "--json", ids[1]); json.Unmarshal([]byte(r.stdout), &view) != nil ||
		view.Marketplace != upload.MarketplaceNotAnswering || view.Notice != upload.NotAnswering || view.Failed != 0 || view.Waiting == 0 {
		t.Errorf("producer status --json during the outage: marketplace %q, notice %q, %d failed, %d waiting; want not_answering, the notice, 0 failed, rows waiting\n%s",
			view.Marketplace, view.Notice, view.Failed, view.Waiting, r.stdout)
	}
	if v, ok := metric(t, w.metrics[0], circuit.MetricState); !ok || v == 0 {
		t.Errorf("consumer-1 exports %s = %v (found %v), want 1 or 2 while the API is down", circuit.MetricState, v, ok)
	}

	time.Sleep(time.Until(wentDown.Add(down)))
	report := w.refused()
	during := w.circuit()
	w.outage("")
	back := time.Now()
	if during.State == circuit.Closed || during.Opens != 1 {
		t.Errorf("at the end of the outage the circuit is %s and opened %d times, want open, once", during.State, during.Opens)
	}
	if n := registered(); n > before+limit {
		t.Errorf("%d rows registered during the outage", n-before)
	}

	// What the dead API received once the circuit was open: probes only,
	// one at a time across the four consumers, at least ProbeMin apart.
	var probes []time.Time
	for _, at := range report.RefusedAt {
		if at.After(openedAt.Add(probeMin / 2)) {
			probes = append(probes, at)
		}
	}
	for i := 1; i < len(probes); i++ {
		if gap := probes[i].Sub(probes[i-1]); gap < probeMin-30*time.Millisecond {
			t.Errorf("requests %d and %d reached the dead API %v apart, want at most one per probe interval (%v)", i, i+1, gap, probeMin)
		}
	}
	if len(probes) == 0 || int64(len(probes)) > during.Probes {
		t.Errorf("%d requests reached the dead API while the circuit was open, the fleet handed out %d probes; want 1 ≤ requests ≤ probes", len(probes), during.Probes)
	}
	t.Logf("the dead API got %d requests in %v: %d before the circuit opened, %d probes in %v while open",
		report.Refused, down, report.Refused-len(probes), len(probes), back.Sub(openedAt).Round(time.Millisecond))

	final := make([]uploadstatus.Status, len(ids))
	testwait.For(t, 30*time.Second, "every upload done", func() bool {
		for i, id := range ids {
			if final[i] = statusOf(t, w.bin, w.env, id); !final[i].Done() {
				return false
			}
		}
		return true
	})
	t.Logf("everything registered %v after the API came back", time.Since(back).Round(time.Millisecond))
	for i, s := range sellers {
		if f := final[i]; f.Registered != rows || f.Failed != 0 {
			t.Errorf("%s: %d registered, %d failed, want %d and 0", s, f.Registered, f.Failed, rows)
		}
		if a := w.audit(s); a.Products != rows || a.Accepted != rows || a.RateLimited != 0 || a.MaxInWindow > limit {
			t.Errorf("%s at the sandbox: %d products, %d registrations, %d × 429, %d in one window; want %d, %d, 0, ≤ %d",
				s, a.Products, a.Accepted, a.RateLimited, a.MaxInWindow, rows, rows, limit)
		}
	}
	if dl := w.deadLetters(); len(dl) != 0 {
		t.Errorf("%d rows dead-lettered (first: row %d of %s, %s), want none: the outage is not the rows' failure", len(dl), dl[0].Row, dl[0].Upload, dl[0].Message)
	}
	if st := w.circuit(); st.State != circuit.Closed {
		t.Errorf("after the recovery the circuit is %s, want closed", st.State)
	}
}

// TestPoisonRowsThenRedrive: three rows of a 200-row upload always get a 503
// (the sandbox fails their SKUs only) while the other rows, and another
// seller's, flow. The three land in the dead-letter topic after their 4
// attempts each, and the circuit never opens for them. Once the fault is
// gone, `producer redrive` sends them again: each ends registered once; a
// second redrive sends nothing and registers nothing.
func TestPoisonRowsThenRedrive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs for about 20 s")
	}
	const attempts = 4
	w := startWorld(t, "BULKREG_RETRY_INITIAL=100ms", "BULKREG_RETRY_MAX_INTERVAL=500ms", "BULKREG_RETRY_MAX_ELAPSED=30s",
		"BULKREG_RETRY_MAX_ATTEMPTS="+strconv.Itoa(attempts))
	poison := []string{"P-017", "P-101", "P-160"}
	w.outage(`{"skus": ["` + strings.Join(poison, `", "`) + `"]}`)
	sellers := sellersOnEveryPartition(2)
	id := w.upload(sellers[0], "P", 200)
	other := w.upload(sellers[1], "Q", 150)

	var st uploadstatus.Status
	testwait.For(t, 30*time.Second, "the upload done", func() bool {
		st = statusOf(t, w.bin, w.env, id)
		return st.Done()
	})
	if st.Registered != 197 || st.Failed != 3 {
		t.Fatalf("upload: %d registered, %d failed, want 197 and 3", st.Registered, st.Failed)
	}
	for _, r := range st.Rows {
		if r.State == uploadstatus.Failed && (r.Code != "transient" || r.Attempts != attempts) {
			t.Errorf("row %d failed with code %q after %d attempts, want transient after %d", r.Row, r.Code, r.Attempts, attempts)
		}
	}
	if a := w.audit(sellers[0]); a.Accepted != 197 || a.RateLimited != 0 {
		t.Errorf("the sandbox registered %d of the upload's rows (%d × 429), want the 197 good ones, no 429", a.Accepted, a.RateLimited)
	}
	testwait.For(t, 10*time.Second, "the other seller's upload done", func() bool { return statusOf(t, w.bin, w.env, other).Succeeded() })
	dl := w.deadLetters()
	refusedCalls := w.refused().Refused
	if len(dl) != 3 {
		t.Fatalf("%d dead letters, want the 3 poison rows", len(dl))
	}
	total := 0
	for _, l := range dl {
		total += l.Attempts
		if l.Upload != id || l.Class != "transient" || l.Attempts != attempts {
			t.Errorf("dead letter of row %d of %s: class %q after %d attempts, want a transient row of %s after %d", l.Row, l.Upload, l.Class, l.Attempts, id, attempts)
		}
	}
	if total != refusedCalls {
		t.Errorf("the dead letters count %d attempts, the sandbox refused %d calls", total, refusedCalls)
	}
	if c := w.circuit(); c.State != circuit.Closed || c.Opens != 0 || c.Probes != 0 {
		t.Errorf("the circuit is %s, opened %d times, %d probes; want closed, never opened: three poison rows are not an outage", c.State, c.Opens, c.Probes)
	}

	// The fault is fixed; the operator looks first, then redrives.
	w.outage("")
	dry := producerCLI(t, w.bin, w.env, "redrive", "--dry-run", "--upload", id)
	if dry.code != 0 || !strings.Contains(dry.stderr, "3 rows would be sent") || strings.Count(dry.stdout, "\n"+id) != 3 {
		t.Fatalf("redrive --dry-run: exit %d\n%s%s", dry.code, dry.stdout, dry.stderr)
	}
	if again := statusOf(t, w.bin, w.env, id); again.Failed != 3 {
		t.Errorf("after the dry run %d rows failed, want 3 still (nothing changed)", again.Failed)
	}
	sent := producerCLI(t, w.bin, w.env, "redrive", "--upload", id)
	if sent.code != 0 || !strings.Contains(sent.stderr, "3 rows sent") {
		t.Fatalf("redrive: exit %d\n%s%s", sent.code, sent.stdout, sent.stderr)
	}
	testwait.For(t, 15*time.Second, "the redriven rows registered", func() bool {
		st = statusOf(t, w.bin, w.env, id)
		return st.Succeeded()
	})
	a := w.audit(sellers[0])
	if a.Products != 200 || a.Accepted != 200 || a.RateLimited != 0 {
		t.Errorf("after the redrive the sandbox counts %d products, %d registrations, %d × 429; want 200, 200, 0", a.Products, a.Accepted, a.RateLimited)
	}

	second := producerCLI(t, w.bin, w.env, "redrive", "--upload", id)
	if second.code != 0 || !strings.Contains(second.stderr, "0 rows sent") || strings.TrimSpace(second.stdout) != "" {
		t.Errorf("second redrive: exit %d, want nothing sent\n%s%s", second.code, second.stdout, second.stderr)
	}
	time.Sleep(2 * circuitWindow)
	if b := w.audit(sellers[0]); b.Products != 200 || b.Accepted != 200 || b.Replays != a.Replays {
		t.Errorf("after the second redrive the sandbox counts %d products, %d registrations, %d replays; want 200, 200, %d: nothing new",
			b.Products, b.Accepted, b.Replays, a.Replays)
	}
	var out bytes.Buffer
	for _, r := range st.Rows {
		if r.State != uploadstatus.Registered {
			fmt.Fprintf(&out, "row %d %s; ", r.Row, r.State)
		}
	}
	if out.Len() > 0 {
		t.Errorf("rows not registered after the redrive: %s", out.String())
	}
}

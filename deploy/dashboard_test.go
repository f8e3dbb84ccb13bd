package deploy

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/consumer"
	"github.com/bulkreg/bulkreg/internal/buildinfo"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/producer/httpapi"
	"github.com/bulkreg/bulkreg/producer/upload"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// describedNames is a Registerer that keeps the name of every metric a
// collector describes, including those (like per-partition lag) that have no
// series until the consumer owns a partition.
type describedNames map[string]bool

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d describedNames) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d[m[1]] = true
		}
	}
	return nil
}

func (d describedNames) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d describedNames) Unregister(prometheus.Collector) bool { return false }

// exportedMetrics builds the consumer and the upload service's metrics the
// way the commands do and returns every metric name they describe. Nothing
// is connected: building them does no I/O.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := describedNames{"up": true} // Prometheus's own, per scrape target
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	th, err := throttle.New(rdb, consumer.DefaultConfig().ThrottlePolicy(100, time.Minute, 250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := registryclient.New(registryclient.Options{BaseURL: "http://127.0.0.1:1", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	br, err := circuit.New(rdb, circuit.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := consumer.DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	c, err := consumer.New(cfg, consumer.Deps{
		Throttle: th, Registry: rc, Status: uploadstatus.New(rdb, time.Hour), Uploads: uploadstatus.New(rdb, time.Hour), Calls: compliance.NewRecorder(rdb, time.Hour),
		Ledger: ledger.New(rdb, ledger.Options{}), Retry: registryclient.DefaultRetryPolicy(), PingRedis: func(context.Context) error { return nil }, Registerer: reg,
		RedisTime: func(ctx context.Context) (time.Time, error) { return rdb.Time(ctx).Result() },
		Circuit:   br,
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = c
	upload.NewMetrics(reg)
	httpapi.NewMetrics(reg)
	reg.MustRegister(buildinfo.Collector("consumer"))
	if len(reg) < 10 {
		t.Fatalf("only %d metric names described: %v", len(reg), reg)
	}
	return reg
}

var metricName = regexp.MustCompile(`\b(up|bulkreg_[a-z0-9_]+)\b`)

// labelMatcher follows a label's name in a selector (bulkreg_component="consumer"),
// never a metric's.
var labelMatcher = regexp.MustCompile(`^\s*(=~|!=|!~|=[^=])`)

// metricNames are the names in expr that can be metrics: bulkreg_* and up,
// less label names in matchers.
func metricNames(expr string) []string {
	var out []string
	for _, m := range metricName.FindAllStringIndex(expr, -1) {
		if !labelMatcher.MatchString(expr[m[1]:]) {
			out = append(out, expr[m[0]:m[1]])
		}
	}
	return out
}

// TestDashboard loads the Grafana dashboard and checks that every panel's
// query names a metric the code exports, so a renamed metric cannot leave a
// silently empty panel.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/dashboards/bulkreg.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name, Type, Query string
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr       string `json:"expr"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard has uid %q and %d panels", d.UID, len(d.Panels))
	}
	// The datasource is a variable, so the dashboard works
	// imported into a Grafana whose Prometheus has another uid.
	hasVar := false
	for _, v := range d.Templating.List {
		hasVar = hasVar || v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
	}
	if !hasVar {
		t.Errorf("templating %+v: no datasource variable of type prometheus", d.Templating.List)
	}
	const dsVar = "${datasource}"
	exported := exportedMetrics(t)
	seen := map[string]bool{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.Datasource.UID != dsVar {
			t.Errorf("panel %q: datasource uid %q, want the variable %s", p.Title, p.Datasource.UID, dsVar)
		}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != dsVar {
				t.Errorf("panel %q: query datasource uid %q, want the variable %s", p.Title, tg.Datasource.UID, dsVar)
			}
			names := metricNames(tg.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				base := n
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(n, suffix); ok && exported[b] {
						base = b
					}
				}
				if !exported[base] {
					t.Errorf("panel %q: query %q names %s, which no bulkreg binary exports", p.Title, tg.Expr, n)
				}
				seen[base] = true
			}
		}
	}
	// What the dashboard must show: results, 429s, waits, lag and backlog,
	// dead letters, Redis, consumers up, the circuit, the upload service.
	for _, want := range []string{"bulkreg_consumer_rows_total", "bulkreg_consumer_rate_limited_total", "bulkreg_consumer_throttle_wait_seconds",
		"bulkreg_consumer_partition_lag", "bulkreg_consumer_backlog_seconds", "bulkreg_consumer_dlq_writes_total", "bulkreg_consumer_redis_up", "up",
		"bulkreg_consumer_sendable_rows", "bulkreg_circuit_state", "bulkreg_consumer_redis_state_lost_total",
		"bulkreg_producer_http_requests_total", "bulkreg_producer_http_request_duration_seconds"} {
		if !seen[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
	if t.Failed() {
		all := make([]string, 0, len(exported))
		for n := range exported {
			all = append(all, n)
		}
		sort.Strings(all)
		t.Logf("exported: %s", strings.Join(all, " "))
	}
}

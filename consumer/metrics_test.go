package consumer

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsStartAtZero: every label value an alert watches exists at 0 from
// the start, so the first dead letter after a start is an increase that
// deploy/alerts.yml can see (promtool's test in deploy/ assumes this).
func TestMetricsStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg, func() float64 { return 0 })
	want := `
# HELP bulkreg_consumer_dlq_writes_total Messages written to the dead-letter topic, by error class.
# TYPE bulkreg_consumer_dlq_writes_total counter
bulkreg_consumer_dlq_writes_total{class="bad-message"} 0
bulkreg_consumer_dlq_writes_total{class="misconfigured"} 0
bulkreg_consumer_dlq_writes_total{class="rate_limited"} 0
bulkreg_consumer_dlq_writes_total{class="transient"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "bulkreg_consumer_dlq_writes_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "bulkreg_consumer_rows_total"); err != nil || n != 5 {
		t.Fatalf("rows_total series at start = %d (%v), want 5 (one per result)", n, err)
	}
}

func TestQuotaBacklog(t *testing.T) {
	for _, tc := range []struct {
		name         string
		rows         map[string]int
		limit        int
		window       time.Duration
		wantSeconds  float64
		wantSendable int
	}{
		{"nothing held", nil, 100, time.Minute, 0, 0},
		{"one seller, 500 rows: 5 minutes whatever the fleet", map[string]int{"a": 500}, 100, time.Minute, 300, 100},
		{"many small sellers: all sendable now", map[string]int{"a": 10, "b": 20, "c": 30}, 100, time.Minute, 18, 60},
		{"mixed", map[string]int{"big": 500, "small": 40}, 100, 3 * time.Second, 15, 140},
		{"no limit known", map[string]int{"a": 5}, 0, time.Minute, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, n := quotaBacklog(tc.rows, tc.limit, tc.window)
			if s != tc.wantSeconds || n != tc.wantSendable {
				t.Fatalf("quotaBacklog = %v s, %d sendable; want %v s, %d", s, n, tc.wantSeconds, tc.wantSendable)
			}
		})
	}
}

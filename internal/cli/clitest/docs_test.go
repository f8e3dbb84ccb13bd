package clitest

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/cli"
	"github.com/bulkreg/bulkreg/internal/config"
)

func TestParseReaders(t *testing.T) {
	for _, tc := range []struct {
		cell string
		want []string
		err  bool
	}{
		{"consumer", []string{"consumer"}, false},
		{"consumer, producer (serve/upload)", []string{"consumer", "producer serve", "producer upload"}, false},
		{"devstack (demo)", []string{"devstack demo"}, false},
		{"producer serve", nil, true},
		{"consumer; producer", nil, true},
	} {
		got, err := ParseReaders(tc.cell)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("ParseReaders(%q) = %q, %v; want %q (error %v)", tc.cell, got, err, tc.want, tc.err)
		}
	}
}

// A table that disagrees with the code in each way the check must catch.
func TestCheckSettingsFindsDrift(t *testing.T) {
	page := "## Configuration\n\n" +
		"| flag | environment variable | default | meaning | read by |\n|---|---|---|---|---|\n" +
		"| `--window` | `BULKREG_WINDOW` | `1m` | ok, 1m is 1m0s | tool (run) |\n" +
		"| `--limit` | `BULKREG_LIMIT` | `50` | wrong default | tool (run) |\n" +
		"| `--margin` | `BULKREG_MARGIN` | `1s` | read by a command that does not take it | tool (run/check) |\n" +
		"| `--topic` | `BULKREG_TOPICS` | `t` | wrong variable | tool (run) |\n" +
		"| `--secret` | `BULKREG_SECRET` | — | none | tool (run) |\n" +
		"| `--shutdown-timeout` | `BULKREG_SHUTDOWN_TIMEOUT` | tool run: `30s`<br>other: `45s` | per reader | tool (run) |\n"
	path := filepath.Join(t.TempDir(), "configuration.md")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadDocs(path)
	if err != nil {
		t.Fatal(err)
	}
	run := flag.NewFlagSet("tool run", flag.ContinueOnError)
	b := config.NewBinder(run, func(string) string { return "" })
	window, limit, margin, topic, secret, shutdown, missing := time.Minute, 100, time.Second, "t", "", 30*time.Second, 3
	b.Duration(&window, "window", "w")
	b.Int(&limit, "limit", "l")
	b.Duration(&margin, "margin", "m")
	b.String(&topic, "topic", "t")
	b.Secret(&secret, "secret", "s")
	b.Duration(&shutdown, "shutdown-timeout", "s")
	b.Int(&missing, "missing", "not in the docs")
	run.Bool("json", false, "an argument of one run, not a setting: not in the table")
	check := flag.NewFlagSet("tool check", flag.ContinueOnError)
	got := CheckSettings(r, cli.Command{Name: "tool", Commands: []cli.Command{{Name: "run", Flags: run}, {Name: "check", Flags: check}}})
	wantProblems(t, got,
		`--limit's default for tool run is "50" in the docs, "100" in -h`,
		`--margin says it is read by tool check, whose -h has no such setting`,
		`--topic's variable is BULKREG_TOPIC, not BULKREG_TOPICS`,
		`tool run reads --missing (BULKREG_MISSING, default "3")`,
	)
}

// wantProblems: got is one problem for each of want, each saying it.
func wantProblems(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("no problem says %q:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

func TestCheckMetricsFindsDrift(t *testing.T) {
	r := Docs{Metrics: []Metric{
		{Line: 1, Name: "bulkreg_a_total", Type: "counter", Labels: []string{"class"}, Exporters: []string{"tool"}},
		{Line: 2, Name: "bulkreg_b", Type: "gauge", Exporters: []string{"tool"}},
		{Line: 3, Name: "bulkreg_gone_total", Type: "counter", Exporters: []string{"tool"}},
		{Line: 4, Name: "bulkreg_other", Type: "gauge", Exporters: []string{"other"}},
	}}
	got := CheckMetrics(r, "tool", []ExportedMetric{
		{Name: "bulkreg_a_total", Type: "counter", Labels: []string{"result"}},
		{Name: "bulkreg_b", Type: "histogram"},
		{Name: "bulkreg_new"},
		{Name: "go_goroutines"},
	})
	wantProblems(t, got, "bulkreg_a_total's labels", "bulkreg_b is a gauge in the docs, a histogram", "tool exports bulkreg_new", "bulkreg_gone_total says tool exports it")
}

// Scraped reads a text exposition as Registered reads a registry: each
// family once, its type, and its series' labels without a histogram's le.
func TestScraped(t *testing.T) {
	text := "# HELP bulkreg_calls_total Calls.\n# TYPE bulkreg_calls_total counter\n" +
		"bulkreg_calls_total{seller=\"s1\",code=\"201\"} 1\nbulkreg_calls_total{seller=\"s2\",code=\"429\"} 1\n" +
		"# TYPE bulkreg_latency_seconds histogram\n" +
		"bulkreg_latency_seconds_bucket{route=\"/v1\",le=\"0.1\"} 1\nbulkreg_latency_seconds_bucket{route=\"/v1\",le=\"+Inf\"} 1\n" +
		"bulkreg_latency_seconds_sum{route=\"/v1\"} 0.05\nbulkreg_latency_seconds_count{route=\"/v1\"} 1\n" +
		"# TYPE bulkreg_up gauge\nbulkreg_up 1\n"
	got, err := Scraped(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []ExportedMetric{
		{Name: "bulkreg_calls_total", Type: "counter", Labels: []string{"seller", "code"}},
		{Name: "bulkreg_latency_seconds", Type: "histogram", Labels: []string{"route"}},
		{Name: "bulkreg_up", Type: "gauge"},
	}
	if len(got) != len(want) {
		t.Fatalf("Scraped = %+v, want %+v", got, want)
	}
	for i := range want {
		a, b := slices.Clone(got[i].Labels), slices.Clone(want[i].Labels)
		slices.Sort(a)
		slices.Sort(b)
		if got[i].Name != want[i].Name || got[i].Type != want[i].Type || !slices.Equal(a, b) {
			t.Errorf("Scraped[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := Scraped("bulkreg_up{"); err == nil {
		t.Error("Scraped read a broken exposition without an error")
	}
}

// ReadDocs reads the tables of every page it is given, names the page in
// each row and problem, and refuses a page without a table (the tables
// moved away from where the check reads them).
func TestReadDocsReadsEveryPage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	conf := write("configuration.md", "| flag | environment variable | default | meaning | read by |\n|---|---|---|---|---|\n"+
		"| `--limit` | `BULKREG_LIMIT` | `100` | per seller | tool |\n")
	ops := write("operations.md", "intro\n\n| metric | type | labels | meaning | exported by |\n|---|---|---|---|---|\n"+
		"| `bulkreg_a_total` | counter | class | calls | tool |\n")
	r, err := ReadDocs(conf, ops)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Settings) != 1 || r.Settings[0].File != conf || r.Settings[0].Line != 3 {
		t.Errorf("settings = %+v, want --limit from %s:3", r.Settings, conf)
	}
	if len(r.Metrics) != 1 || r.Metrics[0].File != ops || r.Metrics[0].Line != 5 {
		t.Errorf("metrics = %+v, want bulkreg_a_total from %s:5", r.Metrics, ops)
	}
	run := flag.NewFlagSet("tool", flag.ContinueOnError)
	limit := 50
	config.NewBinder(run, func(string) string { return "" }).Int(&limit, "limit", "l")
	if got := CheckSettings(r, cli.Command{Name: "tool", Flags: run}); len(got) != 1 || !strings.HasPrefix(got[0], conf+":3: --limit's default") {
		t.Errorf("CheckSettings = %q, want one problem at %s:3", got, conf)
	}

	empty := write("README.md", "# tool\n\nno tables here\n")
	bad := write("bad.md", "| flag | environment variable | default | meaning | read by |\n|---|---|---|---|---|\n| `--x` | `BULKREG_X` | `1` | two cells |\n")
	_, err = ReadDocs(conf, empty, bad)
	for _, w := range []string{empty + " holds no settings or metrics table", bad + ":3: 4 columns"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("ReadDocs(conf, empty, bad) = %v, want an error saying %q", err, w)
		}
	}
}

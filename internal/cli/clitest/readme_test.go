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
	readme := "## Configuration\n\n" +
		"| flag | environment variable | default | meaning | read by |\n|---|---|---|---|---|\n" +
		"| `--window` | `BULKREG_WINDOW` | `1m` | ok, 1m is 1m0s | tool (run) |\n" +
		"| `--limit` | `BULKREG_LIMIT` | `50` | wrong default | tool (run) |\n" +
		"| `--margin` | `BULKREG_MARGIN` | `1s` | read by a command that does not take it | tool (run/check) |\n" +
		"| `--topic` | `BULKREG_TOPICS` | `t` | wrong variable | tool (run) |\n" +
		"| `--secret` | `BULKREG_SECRET` | — | none | tool (run) |\n" +
		"| `--shutdown-timeout` | `BULKREG_SHUTDOWN_TIMEOUT` | tool run: `30s`<br>other: `45s` | per reader | tool (run) |\n"
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte(readme), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadREADME(path)
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
	b.Int(&missing, "missing", "not in the README")
	run.Bool("json", false, "an argument of one run, not a setting: not in the table")
	check := flag.NewFlagSet("tool check", flag.ContinueOnError)
	got := CheckSettings(r, cli.Command{Name: "tool", Commands: []cli.Command{{Name: "run", Flags: run}, {Name: "check", Flags: check}}})
	want := []string{
		`--limit's default for tool run is "50" in the README, "100" in -h`,
		`--margin says it is read by tool check, whose -h has no such setting`,
		`--topic's variable is BULKREG_TOPIC, not BULKREG_TOPICS`,
		`tool run reads --missing (BULKREG_MISSING, default "3")`,
	}
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
	r := README{Metrics: []Metric{
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
	for _, w := range []string{"bulkreg_a_total's labels", "bulkreg_b is a gauge in the README, a histogram", "tool exports bulkreg_new", "bulkreg_gone_total says tool exports it"} {
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("no problem says %q:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(got) != 4 {
		t.Errorf("%d problems, want 4:\n%s", len(got), strings.Join(got, "\n"))
	}
}

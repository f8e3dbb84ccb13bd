package deploy

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/bulkreg/bulkreg/internal/cli/clitest"
)

// TestPrometheusConfigAsShipped runs `promtool check config
// deploy/prometheus.yml` from the repository's root, as an operator would,
// and from here: the rule file resolves (relative to the config) and every
// rule in it is valid (an absolute path of the container's would not resolve
// from the repository).
func TestPrometheusConfigAsShipped(t *testing.T) {
	promtool := lookPath(t, "promtool", "prometheus")
	for _, c := range []struct{ dir, file string }{{"..", "deploy/prometheus.yml"}, {".", "prometheus.yml"}} {
		cmd := exec.CommandContext(t.Context(), promtool, "check", "config", c.file)
		cmd.Dir = c.dir
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS: 1 rule files found") {
			t.Errorf("promtool check config %s (in %s): %v\n%s", c.file, c.dir, err, out)
		}
	}
}

// runbookBase is where every alert's runbook lives: a section of
// docs/operations.md.
const runbookBase = "https://github.com/bulkreg/bulkreg/blob/main/docs/operations.md#"

// TestEveryAlertHasARunbook: each alert's runbook_url names a section of
// docs/operations.md that exists, so the link a page carries leads somewhere.
func TestEveryAlertHasARunbook(t *testing.T) {
	raw, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	page, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := clitest.Anchors(string(page))
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			url := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, runbookBase)
			if !ok {
				t.Errorf("alert %s: runbook_url %q, want %s<section>", r.Alert, url, runbookBase)
				continue
			}
			if !anchors[anchor] {
				t.Errorf("alert %s: docs/operations.md has no section #%s", r.Alert, anchor)
			}
		}
	}
	if n < 11 {
		t.Errorf("%d alerts read from alerts.yml, want at least 11", n)
	}
}

package deploy

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite k8s/components/monitoring/prometheusrule.yaml from alerts.yml")

const prometheusRuleFile = "k8s/components/monitoring/prometheusrule.yaml"

// prometheusRuleHeader precedes alerts.yml's groups, indented under spec:,
// in the PrometheusRule.
const prometheusRuleHeader = `# Generated from deploy/alerts.yml, whose comments explain each rule: edit
# that file, then run
#   go -C deploy test . -run TestPrometheusRuleMatchesAlerts -update
# (the test fails while the two differ).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: bulkreg
spec:
`

// TestPrometheusRuleMatchesAlerts: the Kubernetes component's
// PrometheusRule holds the same groups and rules as alerts.yml (which
// promtool tests), field by field, so what pages on Kubernetes is what was
// tested.
func TestPrometheusRuleMatchesAlerts(t *testing.T) {
	raw, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		body := string(raw[strings.Index(string(raw), "groups:"):])
		var b strings.Builder
		b.WriteString(prometheusRuleHeader)
		for line := range strings.Lines(body) {
			if strings.TrimSpace(line) != "" {
				b.WriteString("  ")
			}
			b.WriteString(line)
		}
		if err := os.WriteFile(prometheusRuleFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var alerts struct {
		Groups []map[string]any `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &alerts); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	pr, err := os.ReadFile(prometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(pr, &rule); err != nil {
		t.Fatalf("%s: %v", prometheusRuleFile, err)
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" {
		t.Fatalf("%s is %s %s, want monitoring.coreos.com/v1 PrometheusRule", prometheusRuleFile, rule.APIVersion, rule.Kind)
	}
	if diff := ruleDiff(alerts.Groups, rule.Spec.Groups); diff != "" {
		t.Fatalf("%s differs from alerts.yml (run go -C deploy test . -run TestPrometheusRuleMatchesAlerts -update):\n%s", prometheusRuleFile, diff)
	}
	if n := len(rule.Spec.Groups); n < 2 {
		t.Fatalf("%d groups compared, want at least 2", n)
	}
}

// ruleDiff names each group or rule that is not the same in want and got.
func ruleDiff(want, got []map[string]any) string {
	index := func(gs []map[string]any) map[string]any {
		m := map[string]any{}
		for _, g := range gs {
			rules, _ := g["rules"].([]any)
			for i, r := range rules {
				rm, _ := r.(map[string]any)
				name, _ := rm["alert"].(string)
				if name == "" {
					name, _ = rm["record"].(string)
				}
				m[fmt.Sprintf("group %v, rule %d (%s)", g["name"], i, name)] = r
			}
			rest := map[string]any{}
			for k, v := range g {
				if k != "rules" {
					rest[k] = v
				}
			}
			m[fmt.Sprintf("group %v", g["name"])] = rest
		}
		return m
	}
	w, g := index(want), index(got)
	var out []string
	for k, v := range w {
		if gv, ok := g[k]; !ok {
			out = append(out, k+": missing")
		} else if !reflect.DeepEqual(v, gv) {
			out = append(out, fmt.Sprintf("%s: alerts.yml has %v, the PrometheusRule %v", k, v, gv))
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			out = append(out, k+": not in alerts.yml")
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// TestTargetsCarryTheComponent: every bulkreg_component value the alerts and
// the dashboard select is one compose's Prometheus sets (prometheus.yml) and
// one the Kubernetes pods carry as app.kubernetes.io/component, which the
// PodMonitors copy into bulkreg_component; and nothing selects by job, whose
// name differs between the two.
func TestTargetsCarryTheComponent(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	selectors := read("alerts.yml") + read("grafana/dashboards/bulkreg.json")
	if m := regexp.MustCompile(`job\s*=~?\s*\\?"`).FindString(selectors); m != "" {
		t.Errorf("an alert or panel selects by job (%q): select by bulkreg_component", m)
	}
	values := map[string]bool{}
	for _, m := range regexp.MustCompile(`bulkreg_component=\\?"([^"\\]+)`).FindAllStringSubmatch(selectors, -1) {
		values[m[1]] = true
	}
	for _, want := range []string{"consumer", "upload-service"} {
		if !values[want] {
			t.Errorf("no alert or panel selects bulkreg_component=%q", want)
		}
	}
	prom := read("prometheus.yml")
	pods := read("k8s/base/consumer.yaml") + read("k8s/base/producer.yaml")
	podMonitors := read("k8s/components/monitoring/podmonitor.yaml")
	for v := range values {
		if !regexp.MustCompile(`(?m)(bulkreg_component: |replacement: )` + regexp.QuoteMeta(v) + `$`).MatchString(prom) {
			t.Errorf("prometheus.yml sets no bulkreg_component %q on a scrape job, which the alerts select", v)
		}
		if !strings.Contains(pods, "app.kubernetes.io/component: "+v+"\n") {
			t.Errorf("no pod in deploy/k8s/base carries app.kubernetes.io/component: %s, which the alerts select as bulkreg_component", v)
		}
	}
	if n := strings.Count(podMonitors, "sourceLabels: [__meta_kubernetes_pod_label_app_kubernetes_io_component]\n          targetLabel: bulkreg_component"); n != 2 {
		t.Errorf("%d PodMonitor endpoints copy app.kubernetes.io/component into bulkreg_component, want 2", n)
	}
}

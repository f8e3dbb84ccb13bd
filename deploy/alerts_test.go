// Package deploy holds the operators' files (alerts, Prometheus and Grafana
// configuration, manifests); its tests check them offline with the tools
// operators use, so a broken rule fails `make test`, not a night on call.
package deploy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAlertRules runs promtool's own unit tests of deploy/alerts.yml: every
// alert has a case where it fires and one where it stays quiet.
func TestAlertRules(t *testing.T) {
	promtool := lookPath(t, "promtool", "prometheus")
	out, err := exec.CommandContext(t.Context(), promtool, "check", "rules", "alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules alerts.yml: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(t.Context(), promtool, "test", "rules", "alerts_test.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules alerts_test.yml: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool did not report SUCCESS:\n%s", out)
	}
}

// lookPath finds a tool the tests run for real. It fails rather than skips:
// `make test` installs it (make deps), and a skipped check proves nothing.
func lookPath(t *testing.T, name, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not on PATH: run `make deps` (Debian package %s)", name, debianPackage)
	}
	return p
}

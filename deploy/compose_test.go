package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// composeFile is the part of a Compose file the checks read.
type composeFile struct {
	Services map[string]struct {
		Image       string `json:"image"`
		Restart     string `json:"restart"`
		Healthcheck *struct {
			Test    any  `json:"test"`
			Disable bool `json:"disable"`
		} `json:"healthcheck"`
		Deploy *struct {
			Resources *struct {
				Limits *struct {
					CPUs   string `json:"cpus"`
					Memory string `json:"memory"`
				} `json:"limits"`
			} `json:"resources"`
		} `json:"deploy"`
	} `json:"services"`
}

// pinnedImage: a registry path and a tag naming a release down to its
// patch (redis:7.4.6-alpine, prom/prometheus:v3.5.0), not a line that moves
// (redis:7-alpine, :latest), and its digest when it has one
// (TestImagesByDigest).
var pinnedImage = regexp.MustCompile(`^[a-z0-9./_-]+:v?[0-9]+\.[0-9]+\.[0-9]+([.-][A-Za-z0-9.-]+)?(@sha256:[0-9a-f]{64})?$`)

// TestComposeFiles holds docker-compose.yml and the files layered on it:
// every service has resource limits and a health check (a one-shot service
// may disable its check: its exit status is its health), every image from a
// registry a pinned release, Kafka a 4.x one; and docker-compose itself
// accepts each combination (`config`, offline), when it is installed.
func TestComposeFiles(t *testing.T) {
	for _, f := range []string{"../docker-compose.yml", "compose.redis-cluster.yml", "compose.redis-sentinel.yml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c composeFile
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for name, s := range c.Services {
			if s.Image == "" && f != "../docker-compose.yml" {
				continue // an override of a service of the main file
			}
			if s.Image != "" && !strings.HasPrefix(s.Image, "bulkreg:") && !pinnedImage.MatchString(s.Image) {
				t.Errorf("%s: service %s: image %q is not a pinned release (name:major.minor.patch)", f, name, s.Image)
			}
			if strings.HasPrefix(s.Image, "apache/kafka:") && !strings.HasPrefix(s.Image, "apache/kafka:4.") {
				t.Errorf("%s: service %s: %s, want Apache Kafka 4.x", f, name, s.Image)
			}
			oneShot := s.Restart == "no"
			switch hc := s.Healthcheck; {
			case hc == nil:
				t.Errorf("%s: service %s has no healthcheck", f, name)
			case hc.Disable && !oneShot:
				t.Errorf("%s: service %s disables its healthcheck, but it keeps running (restart %q)", f, name, s.Restart)
			case !hc.Disable && hc.Test == nil:
				t.Errorf("%s: service %s: healthcheck without a test", f, name)
			}
			if d := s.Deploy; d == nil || d.Resources == nil || d.Resources.Limits == nil || d.Resources.Limits.Memory == "" || d.Resources.Limits.CPUs == "" {
				if !oneShot || f == "../docker-compose.yml" {
					t.Errorf("%s: service %s has no deploy.resources.limits (memory and cpus)", f, name)
				}
			}
		}
	}

	dc, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Log("docker-compose is not installed (Debian package docker-compose): the files were not validated by it")
		return
	}
	for _, extra := range [][]string{nil, {"-f", "deploy/compose.redis-cluster.yml"}, {"-f", "deploy/compose.redis-sentinel.yml"}} {
		args := append([]string{"-f", "docker-compose.yml"}, extra...)
		cmd := exec.CommandContext(t.Context(), dc, append(args, "config", "--quiet")...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "BULKREG_REDIS_PASSWORD=test", "BULKREG_JWT_SECRET=test")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("docker-compose %s config: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

package deploy

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var (
	maxmemoryArg = regexp.MustCompile(`--maxmemory (\d+)(mb|gb)\b`)
	memoryLimit  = regexp.MustCompile(`^(\d+)(m|Mi|g|Gi)$`)
)

func sizeMB(n, unit string) float64 {
	v, _ := strconv.ParseFloat(n, 64)
	switch unit {
	case "gb", "g":
		return v * 1000
	case "Gi":
		return v * 1024 * 1.048576
	case "Mi":
		return v * 1.048576
	}
	return v
}

// TestRedisMaxmemoryFitsItsLimit: every Redis the Compose files and the k8s
// dev overlay start has a maxmemory, noeviction, and a maxmemory of at
// most 80 % of its container's memory limit: full, Redis refuses writes
// (a seller past their share gets 429, the consumers fail closed) instead
// of the kernel killing it, with room for its own overhead and the fork of
// an append-only rewrite.
func TestRedisMaxmemoryFitsItsLimit(t *testing.T) {
	check := func(where, command, limit string) {
		t.Helper()
		m := maxmemoryArg.FindStringSubmatch(command)
		l := memoryLimit.FindStringSubmatch(limit)
		switch {
		case m == nil:
			t.Errorf("%s: redis-server runs without --maxmemory", where)
		case !strings.Contains(command, "--maxmemory-policy noeviction"):
			t.Errorf("%s: redis-server runs without --maxmemory-policy noeviction", where)
		case l == nil:
			t.Errorf("%s: no memory limit to hold maxmemory to (%q)", where, limit)
		default:
			if mm, lim := sizeMB(m[1], m[2]), sizeMB(l[1], l[2]); mm > 0.8*lim {
				t.Errorf("%s: maxmemory %s%s is more than 80 %% of the memory limit %s", where, m[1], m[2], limit)
			}
		}
	}
	for _, f := range []string{"../docker-compose.yml", "compose.redis-cluster.yml", "compose.redis-sentinel.yml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Services map[string]struct {
				Image   string `json:"image"`
				Command any    `json:"command"`
				Deploy  *struct {
					Resources *struct {
						Limits *struct {
							Memory string `json:"memory"`
						} `json:"limits"`
					} `json:"resources"`
				} `json:"deploy"`
			} `json:"services"`
		}
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		n := 0
		for name, s := range c.Services {
			cmd := strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(toText(s.Command)), "\n", " ")), " ")
			if !strings.Contains(cmd, "redis-server") || strings.Contains(cmd, "--sentinel") {
				continue
			}
			n++
			limit := ""
			if s.Deploy != nil && s.Deploy.Resources != nil && s.Deploy.Resources.Limits != nil {
				limit = s.Deploy.Resources.Limits.Memory
			}
			check(f+": service "+name, cmd, limit)
		}
		if n == 0 {
			t.Errorf("%s: no service runs redis-server", f)
		}
	}

	b, err := os.ReadFile("k8s/overlays/dev/redis.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name      string   `json:"name"`
						Command   []string `json:"command"`
						Resources struct {
							Limits map[string]string `json:"limits"`
						} `json:"resources"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(splitFirstDoc(b), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		t.Fatal("k8s/overlays/dev/redis.yaml: no container")
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		check("k8s/overlays/dev/redis.yaml: container "+c.Name, strings.Join(c.Command, " "), c.Resources.Limits["memory"])
	}
}

// toText is a Compose command as one text: a string, or a list joined.
func toText(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case []any:
		parts := make([]string, len(c))
		for i, p := range c {
			parts[i], _ = p.(string)
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// splitFirstDoc is the first document of a multi-document YAML file.
func splitFirstDoc(b []byte) []byte {
	s := string(b)
	if i := strings.Index(s, "\n---"); i >= 0 {
		s = s[:i]
	}
	return []byte(s)
}

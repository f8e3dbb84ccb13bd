package deploy

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// awaitingDigest are the images still named by tag alone: a known gap,
// empty while every image has its digest. A tag can be pushed again, so
// what it names may change under the same name; a digest (name:tag@sha256:…)
// cannot. docs/dependencies.md ("Base images") says how to look each digest
// up and write it. An image goes on this list only with a reason beside it;
// the test fails on a listed image that has its digest, or that no file names
// any more, and on an image outside the list that has none.
var awaitingDigest []string

// byDigest: a name, a tag that says which release (read by people) and
// the sha256 digest that says which bytes (read by the engine).
var byDigest = regexp.MustCompile(`^[a-z0-9./_-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$`)

// imageFiles are the files that name images a deployment pulls: the
// Dockerfile's stages, the Compose files, the Kubernetes manifests.
func imageFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../Dockerfile", "../docker-compose.yml"}
	for _, pattern := range []string{"compose.*.yml", "k8s/*/*.yaml", "k8s/*/*/*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

var (
	fromLine  = regexp.MustCompile(`(?m)^FROM\s+(?:--platform=\S+\s+)?(\S+)`)
	argLine   = regexp.MustCompile(`(?m)^ARG\s+(\w+)=(\S*)$`)
	imageLine = regexp.MustCompile(`(?m)^\s*(?:-\s+)?image:\s*["']?([^\s"']+)`)
)

// imagesIn returns the images a file names, with the Dockerfile's ARG
// defaults filled in; bulkreg's own image (built here, named by the
// overlays' kustomize images and compose's BULKREG_IMAGE_TAG) is left out.
func imagesIn(name, text string) []string {
	var refs []string
	if filepath.Base(name) == "Dockerfile" {
		args := map[string]string{}
		for _, m := range argLine.FindAllStringSubmatch(text, -1) {
			args[m[1]] = m[2]
		}
		for _, m := range fromLine.FindAllStringSubmatch(text, -1) {
			refs = append(refs, os.Expand(m[1], func(k string) string { return args[k] }))
		}
	} else {
		for _, m := range imageLine.FindAllStringSubmatch(text, -1) {
			refs = append(refs, m[1])
		}
	}
	return slices.DeleteFunc(refs, func(r string) bool { return r == "bulkreg" || strings.HasPrefix(r, "bulkreg:") })
}

// imageProblems checks what the files name against the known gap.
func imageProblems(files map[string]string, gap []string) (problems, awaiting []string) {
	named := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		for _, ref := range imagesIn(name, files[name]) {
			tagged, _, hasDigest := strings.Cut(ref, "@")
			named[tagged] = true
			switch {
			case hasDigest && !byDigest.MatchString(ref):
				problems = append(problems, fmt.Sprintf("%s: image %q: want name:tag@sha256:<64 hex digits>", name, ref))
			case hasDigest && slices.Contains(gap, tagged):
				problems = append(problems, fmt.Sprintf("%s: image %q has its digest: take %s off awaitingDigest", name, ref, tagged))
			case !hasDigest && !slices.Contains(gap, ref):
				problems = append(problems, fmt.Sprintf("%s: image %q is named by tag alone: add its digest (docs/dependencies.md, \"Base images\")", name, ref))
			case !hasDigest:
				awaiting = append(awaiting, name+": "+ref)
			}
		}
	}
	for _, ref := range gap {
		if !named[ref] {
			problems = append(problems, fmt.Sprintf("awaitingDigest lists %q, which no file names: take it off", ref))
		}
	}
	return problems, awaiting
}

// TestImagesByDigest: every image the Dockerfile, the Compose files and
// the manifests pull is named by digest, or is one of the known gap's
// (awaitingDigest), which the test lists in its log.
func TestImagesByDigest(t *testing.T) {
	files := map[string]string{}
	for _, f := range imageFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		files[f] = string(b)
	}
	problems, awaiting := imageProblems(files, awaitingDigest)
	for _, p := range problems {
		t.Error(p)
	}
	for _, a := range awaiting {
		t.Logf("known gap, named by tag alone: %s", a)
	}
}

// TestImageProblems: the check itself, on files written for it.
func TestImageProblems(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("ab", 32)
	files := map[string]string{
		"Dockerfile": "ARG GO_VERSION=1.26.11\nFROM golang:${GO_VERSION}" + digest + " AS build\nFROM busybox:1.37-musl AS wget\nFROM gcr.io/distroless/static-debian12:nonroot\n",
		"compose.yml": "services:\n  redis:\n    image: redis:7.4.6-alpine\n  kafka:\n    image: \"apache/kafka:4.1.1" + digest + "\"\n" +
			"  bad:\n    image: prom/prometheus:v3.5.0@sha256:abc\n  own:\n    image: bulkreg:${BULKREG_IMAGE_TAG:-local}\n",
		"job.yaml": "spec:\n  containers:\n    - name: x\n      image: grafana/grafana:11.6.0\n    - image: bulkreg\n",
	}
	gap := []string{"busybox:1.37-musl", "golang:1.26.11", "redis:7.4.6-alpine", "grafana/grafana:11.6.0", "nginx:1.29.0"}
	problems, awaiting := imageProblems(files, gap)
	want := []string{
		`Dockerfile: image "golang:1.26.11` + digest + `" has its digest: take golang:1.26.11 off awaitingDigest`,
		`Dockerfile: image "gcr.io/distroless/static-debian12:nonroot" is named by tag alone: add its digest (docs/dependencies.md, "Base images")`,
		`compose.yml: image "prom/prometheus:v3.5.0@sha256:abc": want name:tag@sha256:<64 hex digits>`,
		`awaitingDigest lists "nginx:1.29.0", which no file names: take it off`,
	}
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	wantAwaiting := []string{"Dockerfile: busybox:1.37-musl", "compose.yml: redis:7.4.6-alpine", "job.yaml: grafana/grafana:11.6.0"}
	if !slices.Equal(awaiting, wantAwaiting) {
		t.Errorf("awaiting %v, want %v", awaiting, wantAwaiting)
	}
}

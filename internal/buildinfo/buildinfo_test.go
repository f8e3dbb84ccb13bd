package buildinfo

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRequested(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--version"}, true},
		{[]string{"-version"}, true},
		{[]string{"upload", "--version"}, false}, // a subcommand's flag, not ours
		{[]string{"--seller", "--version"}, false},
	} {
		if got := Requested(tc.args); got != tc.want {
			t.Errorf("Requested(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestLineNamesBinaryAndGo(t *testing.T) {
	l := Line("consumer")
	if !strings.HasPrefix(l, "consumer ") || !strings.HasSuffix(l, runtime.Version()) {
		t.Fatalf("Line = %q, want the binary first and %s last", l, runtime.Version())
	}
}

func TestCollectorExportsOneSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector("producer"))
	want := `
# HELP bulkreg_build_info The running build: 1, labelled with the binary, the version, the VCS revision and the Go version.
# TYPE bulkreg_build_info gauge
bulkreg_build_info{binary="producer",goversion="` + runtime.Version() + `",revision="` + Read().Revision + `",version="` + Read().Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "bulkreg_build_info"); err != nil {
		t.Fatal(err)
	}
}

func TestFromBuild(t *testing.T) {
	fromCheckout := &debug.BuildInfo{
		GoVersion: "go1.26.11",
		Main:      debug.Module{Version: "v0.0.0-20261126232047-7e0a9dbbef2e+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "7e0a9dbbef2e06b03858fa1b79cb62d85841b8fa"},
			{Key: "vcs.time", Value: "2026-11-26T23:20:47Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	// What `docker build` makes of a context without .git.
	withoutGit := &debug.BuildInfo{GoVersion: "go1.26.11", Main: debug.Module{Version: "(devel)"}}
	stamp := Stamp{Version: "v0.4.0-12-g43e52e8", Commit: "43e52e8a1b2c3d4e5f60718293a4b5c6d7e8f901", Date: "2026-11-20T10:00:00+09:00"}
	for _, tc := range []struct {
		name  string
		bi    *debug.BuildInfo
		stamp Stamp
		want  Info
	}{
		{"no build information", nil, Stamp{},
			Info{Version: "(devel)", Revision: Unknown, Date: Unknown, GoVersion: Unknown}},
		{"an image built before the stamp", withoutGit, Stamp{},
			Info{Version: "(devel)", Revision: Unknown, Date: Unknown, GoVersion: "go1.26.11"}},
		{"go build in a checkout", fromCheckout, Stamp{},
			Info{Version: "v0.0.0-20261126232047-7e0a9dbbef2e+dirty", Revision: "7e0a9dbbef2e06b03858fa1b79cb62d85841b8fa", Modified: true, Date: "2026-11-26T23:20:47Z", GoVersion: "go1.26.11"}},
		{"an image stamped by make image", withoutGit, stamp,
			Info{Version: "v0.4.0-12-g43e52e8", Revision: stamp.Commit, Date: stamp.Date, GoVersion: "go1.26.11"}},
		{"the stamp wins over the checkout's own", fromCheckout, stamp,
			Info{Version: "v0.4.0-12-g43e52e8", Revision: stamp.Commit, Date: stamp.Date, GoVersion: "go1.26.11"}},
		{"git describe --dirty marks it modified", withoutGit, Stamp{Version: "43e52e8-dirty"},
			Info{Version: "43e52e8-dirty", Revision: Unknown, Modified: true, Date: Unknown, GoVersion: "go1.26.11"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromBuild(tc.bi, tc.stamp); got != tc.want {
				t.Errorf("FromBuild = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		info Info
		want string
	}{
		{Info{Version: "(devel)", Revision: Unknown, Date: Unknown, GoVersion: "go1.26.11"}, "(devel) revision unknown go1.26.11"},
		{Info{Version: "v0.4.0-12-g43e52e8-dirty", Revision: "43e52e8a1b2c3d4e5f60718293a4b5c6d7e8f901", Modified: true, Date: "2026-11-20T10:00:00+09:00", GoVersion: "go1.26.11"},
			"v0.4.0-12-g43e52e8-dirty revision 43e52e8a1b2c (modified) of 2026-11-20T10:00:00+09:00 go1.26.11"},
	} {
		if got := tc.info.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

const pkgPath = "github.com/bulkreg/bulkreg/internal/buildinfo"

// stampValues are what the stamped-binary test links in, by variable name.
var stampValues = map[string]string{
	"version": "v9.8.7-3-gabcdef1-dirty",
	"commit":  "abcdef1234567890abcdef1234567890abcdef12",
	"date":    "2026-11-26T23:20:47+00:00",
}

// releaseStamps returns the variables the release builds stamp: the -X
// flags of the Makefile's LDFLAGS and of the Dockerfile's go build. The
// linker ignores -X for a variable that does not exist, so a renamed
// variable would silently leave every image "(devel) revision unknown":
// the test below builds with exactly these names.
func releaseStamps(t *testing.T) (makefile, dockerfile []string) {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	mk := read("Makefile")
	if m := regexp.MustCompile(`(?m)^BUILDINFO\s*:?=\s*(\S+)$`).FindStringSubmatch(mk); m == nil || m[1] != pkgPath {
		t.Fatalf("the Makefile's BUILDINFO is %q, want %s", m, pkgPath)
	}
	for _, m := range regexp.MustCompile(`-X \$\(BUILDINFO\)\.(\w+)=`).FindAllStringSubmatch(mk, -1) {
		makefile = append(makefile, m[1])
	}
	for _, m := range regexp.MustCompile(`-X `+regexp.QuoteMeta(pkgPath)+`\.(\w+)=`).FindAllStringSubmatch(read("Dockerfile"), -1) {
		dockerfile = append(dockerfile, m[1])
	}
	return makefile, dockerfile
}

// TestStampedBinaryReportsItsBuild links a binary the way `make build` and
// the Dockerfile do and runs it: its --version line and its
// bulkreg_build_info labels carry the stamp (before the stamp, every image
// said "(devel) revision unknown").
func TestStampedBinaryReportsItsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary (a few seconds)")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	mk, docker := releaseStamps(t)
	want := []string{"commit", "date", "version"}
	for name, got := range map[string][]string{"Makefile": mk, "Dockerfile": docker} {
		got = slices.Sorted(slices.Values(got))
		if !slices.Equal(got, want) {
			t.Errorf("the %s stamps %v, want each of %v once", name, got, want)
		}
	}
	var ldflags []string
	for _, name := range mk {
		ldflags = append(ldflags, "-X", pkgPath+"."+name+"="+stampValues[name])
	}
	bin := filepath.Join(t.TempDir(), "stamped")
	build := exec.Command(goTool, "build", "-o", bin, "-ldflags", strings.Join(ldflags, " "), "./testdata/stamped")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("running the stamped binary: %v", err)
	}
	line, labelsJSON, _ := strings.Cut(string(out), "\n")
	wantLine := "stamped v9.8.7-3-gabcdef1-dirty revision abcdef123456 (modified) of 2026-11-26T23:20:47+00:00 go"
	if !strings.HasPrefix(line, wantLine) {
		t.Errorf("--version says %q, want %q…", line, wantLine)
	}
	var labels map[string]string
	if err := json.Unmarshal([]byte(labelsJSON), &labels); err != nil {
		t.Fatalf("the binary's labels %q: %v", labelsJSON, err)
	}
	if labels["version"] != stampValues["version"] || labels["revision"] != stampValues["commit"] || labels["binary"] != "stamped" {
		t.Errorf("bulkreg_build_info labels %v, want version %s and revision %s", labels, stampValues["version"], stampValues["commit"])
	}
}

// TestImageBuildsWithThePinnedToolchain: the Dockerfile's Go image is the
// toolchain go.mod pins, the one whose standard library `make vulncheck`
// checks.
func TestImageBuildsWithThePinnedToolchain(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	tc := regexp.MustCompile(`(?m)^toolchain go(\S+)$`).FindSubmatch(mod)
	if tc == nil {
		t.Fatal("go.mod has no toolchain line: the Go release that builds bulkreg is not pinned")
	}
	img := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)$`).FindSubmatch(docker)
	if img == nil || string(img[1]) != string(tc[1]) {
		t.Errorf("the Dockerfile builds with golang:%s, want %s as go.mod's toolchain line says", img, tc[1])
	}
}

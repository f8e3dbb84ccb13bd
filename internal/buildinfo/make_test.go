package buildinfo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// pinnedToolchain is go.mod's toolchain line: the Go release that builds
// bulkreg.
func pinnedToolchain(t *testing.T) string {
	t.Helper()
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	tc := regexp.MustCompile(`(?m)^toolchain (go\S+)$`).FindSubmatch(mod)
	if tc == nil {
		t.Fatal("go.mod has no toolchain line: the Go release that builds bulkreg is not pinned")
	}
	return string(tc[1])
}

// fakeGo writes a go command that stands for an installed go1.26.8: it
// answers `env`, runs the pinned toolchain (`version` with GOTOOLCHAIN set)
// only when canFetch, and writes each `build` it is asked for, with the
// GOTOOLCHAIN it was given, to the returned log instead of building.
func fakeGo(t *testing.T, canFetch bool) (goCmd, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "builds")
	fetch := "exit 1"
	if canFetch {
		fetch = `echo "go version $GOTOOLCHAIN linux/amd64"; exit 0`
	}
	script := `#!/bin/sh
case "$1" in
env)
	case "$2" in GOVERSION) echo go1.26.8 ;; GOPROXY) echo off ;; esac ;;
version)
	if [ -n "$GOTOOLCHAIN" ] && [ "$GOTOOLCHAIN" != local ]; then
		if [ $# -gt 1 ]; then echo "$2: $GOTOOLCHAIN"; exit 0; fi
		` + fetch + `
	fi
	echo "go version go1.26.8 linux/amd64" ;;
build)
	echo "GOTOOLCHAIN=$GOTOOLCHAIN $*" >> "` + log + `" ;;
*)
	echo "fake go: $*" >&2; exit 2 ;;
esac
`
	goCmd = filepath.Join(dir, "go")
	if err := os.WriteFile(goCmd, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return goCmd, log
}

func runMake(t *testing.T, goCmd string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	makeCmd, lookErr := exec.LookPath("make")
	if lookErr != nil {
		t.Skip("no make on PATH")
	}
	cmd := exec.Command(makeCmd, append([]string{"-s", "-C", "../..", "GO=" + goCmd}, args...)...)
	// The case that must work: an installed go older than the pinned one,
	// told to use itself.
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// TestMakeBuildUsesThePinnedToolchain: `make build` builds with the
// toolchain go.mod pins even where GOTOOLCHAIN=local and the installed go is
// older, so the binaries carry the standard library that was scanned.
func TestMakeBuildUsesThePinnedToolchain(t *testing.T) {
	pinned := pinnedToolchain(t)
	goCmd, log := fakeGo(t, true)
	if _, stderr, err := runMake(t, goCmd, "build"); err != nil {
		t.Fatalf("make build: %v\n%s", err, stderr)
	}
	builds, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("make build ran no go build: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(builds)), "\n") {
		if !strings.HasPrefix(line, "GOTOOLCHAIN="+pinned+" ") {
			t.Errorf("make build ran %q, want it with GOTOOLCHAIN=%s (go.mod's toolchain line)", line, pinned)
		}
	}
}

// TestMakeBuildRefusesAnOlderToolchain: an installed go older than the
// pinned one that cannot fetch it builds nothing, and says which two
// releases met and how to get the pinned one.
func TestMakeBuildRefusesAnOlderToolchain(t *testing.T) {
	pinned := pinnedToolchain(t)
	goCmd, log := fakeGo(t, false)
	_, stderr, err := runMake(t, goCmd, "build")
	if err == nil {
		t.Errorf("make build with a go that cannot run %s succeeded, want it refused", pinned)
	}
	if b, err := os.ReadFile(log); err == nil {
		t.Errorf("make build built with the installed go instead of %s:\n%s", pinned, b)
	}
	for _, want := range []string{pinned, "go1.26.8", "GOPROXY", "install " + pinned} {
		if !strings.Contains(stderr, want) {
			t.Errorf("make build's refusal %q does not say %q", stderr, want)
		}
	}
}

// TestVulncheckScansWhatMakeBuildShips: `make vulncheck` (part of `make
// test`) builds first and scans every binary `make build` writes in binary
// mode, so its answer is about the binaries as linked.
func TestVulncheckScansWhatMakeBuildShips(t *testing.T) {
	goCmd, _ := fakeGo(t, true)
	stdout, stderr, err := runMake(t, goCmd, "-n", "vulncheck")
	if err != nil {
		t.Fatalf("make -n vulncheck: %v\n%s", err, stderr)
	}
	build := strings.Index(stdout, " build -ldflags")
	binaryMode := strings.Index(stdout, "-mode=binary")
	if build < 0 || binaryMode < 0 || binaryMode < build {
		t.Fatalf("make vulncheck does not build and then scan the binaries with -mode=binary:\n%s", stdout)
	}
	cmds, err := os.ReadDir("../../cmd")
	if err != nil {
		t.Fatal(err)
	}
	loop := regexp.MustCompile(`for b in ([^;]*); do[^\n]*\n[^\n]*\n[^\n]*-mode=binary "\$b"`).FindStringSubmatch(stdout)
	if loop == nil {
		t.Fatalf("make vulncheck's binary scan names no binaries:\n%s", stdout)
	}
	scanned := strings.Fields(loop[1])
	for _, c := range cmds {
		if c.IsDir() && !slices.Contains(scanned, "bin/"+c.Name()) {
			t.Errorf("make vulncheck scans %v in binary mode, not bin/%s that make build writes", scanned, c.Name())
		}
	}
}

// Package buildinfo says which build of bulkreg is running: `--version` on
// every command and the bulkreg_build_info metric read it.
//
// A release build is stamped by the linker with what git said of the
// checkout (`make build`, and the Dockerfile through its VERSION, COMMIT and
// DATE build arguments): an image is built from a context without .git
// (.dockerignore), so the VCS information the Go toolchain stamps on its own
// is empty there. Without a stamp, the toolchain's module and VCS
// information is used (a `go build` or `go run` in a checkout), so there is
// still no version string to forget to bump.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Set at link time only, never written at run time:
//
//	-ldflags "-X github.com/bulkreg/bulkreg/internal/buildinfo.version=$(git describe --tags --always --dirty)
//	          -X github.com/bulkreg/bulkreg/internal/buildinfo.commit=$(git rev-parse HEAD)
//	          -X github.com/bulkreg/bulkreg/internal/buildinfo.date=$(git log -1 --format=%cI)"
//
// The date is the commit's, not the build's, so two builds of one commit
// are the same binary.
var (
	version string
	commit  string
	date    string
)

// Unknown is what a field says when the build carries nothing for it.
const Unknown = "unknown"

// Info is what one binary knows of its own build.
type Info struct {
	Version   string // `git describe` when stamped, else the main module's version: a tag, a pseudo-version or "(devel)"
	Revision  string // the VCS commit, Unknown when neither stamped nor built from a checkout
	Modified  bool   // the checkout had uncommitted changes
	Date      string // the commit's date (RFC 3339), Unknown when not known
	GoVersion string
}

// Stamp is what the linker was given; an empty field was not given.
type Stamp struct {
	Version, Commit, Date string
}

// Read returns this binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return FromBuild(bi, Stamp{Version: version, Commit: commit, Date: date})
}

// FromBuild combines the toolchain's build information (nil when the binary
// has none) with the linker's stamp; a stamped field wins over the
// toolchain's, which is empty in an image built without .git.
func FromBuild(bi *debug.BuildInfo, s Stamp) Info {
	info := Info{Version: "(devel)", Revision: Unknown, Date: Unknown, GoVersion: Unknown}
	if bi != nil {
		info.GoVersion = bi.GoVersion
		if v := bi.Main.Version; v != "" {
			info.Version = v
		}
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				info.Revision = kv.Value
			case "vcs.modified":
				info.Modified = kv.Value == "true"
			case "vcs.time":
				info.Date = kv.Value
			}
		}
	}
	if s.Version != "" {
		info.Version = s.Version
		// git describe --dirty says it; the toolchain's flag may be absent
		// (no .git) or describe another tree than the one stamped.
		info.Modified = strings.HasSuffix(s.Version, "-dirty")
	}
	if s.Commit != "" {
		info.Revision = s.Commit
	}
	if s.Date != "" {
		info.Date = s.Date
	}
	return info
}

// String is the line `--version` prints after the binary's name, for example
// "v0.4.0-12-g<commit>-dirty revision <commit> (modified) of
// 2026-11-26T23:20:47Z go1.26.11": twelve commits after v0.4.0, with
// uncommitted changes, the commit's first 12 hex digits.
func (i Info) String() string {
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if i.Modified {
		rev += " (modified)"
	}
	when := ""
	if i.Date != Unknown && i.Date != "" {
		when = " of " + i.Date
	}
	return fmt.Sprintf("%s revision %s%s %s", i.Version, rev, when, i.GoVersion)
}

// Line is the whole `--version` output of the command named binary.
func Line(binary string) string { return binary + " " + Read().String() }

// Requested reports whether the command line asks for the version only:
// `--version` or `-version` as the first argument (or `version` for commands
// with subcommands, which pass it through).
func Requested(args []string) bool {
	return len(args) > 0 && (args[0] == "--version" || args[0] == "-version")
}

// Collector is the bulkreg_build_info gauge, always 1, whose labels carry the
// build: dashboards join it to see which versions a fleet runs during a
// rolling update.
func Collector(binary string) prometheus.Collector {
	i := Read()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bulkreg_build_info",
		Help: "The running build: 1, labelled with the binary, the version, the VCS revision and the Go version.",
		ConstLabels: prometheus.Labels{
			"binary":    binary,
			"version":   i.Version,
			"revision":  i.Revision,
			"goversion": i.GoVersion,
		},
	})
	g.Set(1)
	return g
}

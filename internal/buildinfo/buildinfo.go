// Package buildinfo says which build of bulkreg is running: `--version` on
// every command and the bulkreg_build_info metric read it from the module
// and VCS information the Go toolchain stamps into each binary, so there is
// no version string to forget to bump.
package buildinfo

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Info is what one binary knows of its own build.
type Info struct {
	Version   string // the main module's version: a tag, a pseudo-version or "(devel)"
	Revision  string // the VCS commit, "unknown" when not built from a checkout
	Modified  bool   // the checkout had uncommitted changes
	GoVersion string
}

// Read returns this binary's build information.
func Read() Info {
	info := Info{Version: "(devel)", Revision: "unknown", GoVersion: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.GoVersion = bi.GoVersion
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the line `--version` prints, for example
// "consumer (devel) revision 43e52e8 (modified) go1.26.8".
func (i Info) String() string {
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if i.Modified {
		rev += " (modified)"
	}
	return fmt.Sprintf("%s revision %s %s", i.Version, rev, i.GoVersion)
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
		Help: "The running build: 1, labelled with the binary, the module version, the VCS revision and the Go version.",
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

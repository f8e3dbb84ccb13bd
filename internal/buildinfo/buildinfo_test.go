package buildinfo

import (
	"runtime"
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
# HELP bulkreg_build_info The running build: 1, labelled with the binary, the module version, the VCS revision and the Go version.
# TYPE bulkreg_build_info gauge
bulkreg_build_info{binary="producer",goversion="` + runtime.Version() + `",revision="` + Read().Revision + `",version="` + Read().Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "bulkreg_build_info"); err != nil {
		t.Fatal(err)
	}
}

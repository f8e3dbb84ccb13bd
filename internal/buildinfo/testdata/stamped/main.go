// Command stamped is built by the buildinfo tests with and without the
// release ldflags: it prints its --version line, then the labels of its
// bulkreg_build_info series as JSON, as a real binary would report them.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg/internal/buildinfo"
)

func main() {
	fmt.Println(buildinfo.Line("stamped"))
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildinfo.Collector("stamped"))
	families, err := reg.Gather()
	if err != nil || len(families) != 1 || len(families[0].GetMetric()) != 1 {
		fmt.Fprintln(os.Stderr, "want one bulkreg_build_info series:", err)
		os.Exit(1)
	}
	labels := map[string]string{}
	for _, l := range families[0].GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if err := json.NewEncoder(os.Stdout).Encode(labels); err != nil {
		os.Exit(1)
	}
}

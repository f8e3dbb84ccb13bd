package clitest

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/bulkreg/bulkreg/internal/cli"
)

// CheckDocs holds the documentation's tables (DocFiles under root, the
// repository's root) to one binary: every setting tree's flag sets take is
// in the settings tables with its reader and default, and no row names a
// reader that does not take it; when exported is not nil, the metrics table
// names exactly the bulkreg_* metrics it returns, with their labels and
// types, as the binary's (tree.Name's). Each binary's test is this one call.
func CheckDocs(t *testing.T, root string, tree cli.Command, exported func() ([]ExportedMetric, error)) {
	t.Helper()
	paths := make([]string, len(DocFiles))
	for i, f := range DocFiles {
		paths[i] = filepath.Join(root, f)
	}
	r, err := ReadDocs(paths...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range CheckSettings(r, tree) {
		t.Error(p)
	}
	if exported == nil {
		return
	}
	metrics, err := exported()
	if err != nil {
		t.Fatalf("%s's metrics: %v", tree.Name, err)
	}
	for _, p := range CheckMetrics(r, tree.Name, metrics) {
		t.Error(p)
	}
}

// Scraped reads the metrics, their types and the labels of their series
// from a Prometheus text exposition (a /metrics answer), for a binary that
// keeps its registry to itself.
func Scraped(text string) ([]ExportedMetric, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(mfs))
	for name := range mfs {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]ExportedMetric, 0, len(names))
	for _, name := range names {
		out = append(out, exportedOf(mfs[name]))
	}
	return out, nil
}

// exportedOf is a gathered family's name, type and the labels its series
// carry (a histogram's bucket bound is not one).
func exportedOf(mf *dto.MetricFamily) ExportedMetric {
	e := ExportedMetric{Name: mf.GetName(), Type: strings.ToLower(mf.GetType().String())}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if !slices.Contains(e.Labels, l.GetName()) {
				e.Labels = append(e.Labels, l.GetName())
			}
		}
	}
	return e
}

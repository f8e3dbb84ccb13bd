package main

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg/internal/cli/clitest"
)

// TestDocs holds the documentation's tables (docs/configuration.md,
// docs/operations.md) to the producer: every setting a subcommand takes
// (from the flag sets it parses) is in the settings table with that
// subcommand in "read by" and its default, no row names a subcommand that
// does not take it, and every metric serve registers is in the metrics
// table with its labels and type.
func TestDocs(t *testing.T) {
	clitest.CheckDocs(t, "../..", commandTree(noEnv), serveMetrics)
}

// serveMetrics are the metrics serve registers, handed over just before it
// would listen.
func serveMetrics() ([]clitest.ExportedMetric, error) {
	var reg *prometheus.Registry
	e := &env{getenv: noEnv, stdout: io.Discard, stderr: io.Discard, registered: func(r *prometheus.Registry) { reg = r }}
	if code := cmdServe(context.Background(), e, []string{"--jwt-secret", "0123456789abcdef0123456789abcdef",
		"--kafka-brokers", "127.0.0.1:1", "--redis-addrs", "127.0.0.1:1"}); code != exitOK || reg == nil {
		return nil, fmt.Errorf("serve did not hand its metrics over: exit %d", code)
	}
	return clitest.Registered(reg)
}

package main

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg/internal/cli"
	"github.com/bulkreg/bulkreg/internal/cli/clitest"
)

// TestDocs holds the documentation's tables (docs/configuration.md,
// docs/operations.md) to the consumer: every setting it takes (from the
// flag set it parses) is in the settings table with "consumer" in "read
// by" and its default, no row says the consumer reads a setting it does
// not, and every metric the consumer registers, on the way it starts
// (stopped just before it listens), is in the metrics table with its
// labels and type.
func TestDocs(t *testing.T) {
	fs, _, _ := bind(func(string) string { return "" })
	clitest.CheckDocs(t, "../..", cli.Command{Name: "consumer", Flags: fs}, consumerMetrics)
}

// consumerMetrics are the metrics the consumer registers, handed over just
// before it would listen.
func consumerMetrics() ([]clitest.ExportedMetric, error) {
	env := map[string]string{"BULKREG_KAFKA_BROKERS": "127.0.0.1:1", "BULKREG_REDIS_ADDRS": "127.0.0.1:1"}
	s, err := parse(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		return nil, err
	}
	var reg *prometheus.Registry
	s.registered = func(r *prometheus.Registry) { reg = r }
	if err := consume(context.Background(), s, io.Discard); err != nil || reg == nil {
		return nil, fmt.Errorf("the consumer did not hand its metrics over: %v", err)
	}
	return clitest.Registered(reg)
}

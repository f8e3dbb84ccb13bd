package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/bulkreg/bulkreg/internal/cli/clitest"
)

func noEnv(string) string { return "" }

// TestCLIConvention: help on stdout (exit 0), one-line usage errors with a
// hint (exit 2) for an unknown flag, a malformed value and a stray argument
// of every subcommand, and completion scripts from the real flag sets.
func TestCLIConvention(t *testing.T) {
	secret := []string{"--jwt-secret", "0123456789abcdef0123456789abcdef"}
	clitest.Check(t, clitest.Binary{
		Name: "producer",
		Run: func(args []string, stdout, stderr *bytes.Buffer) int {
			return run(context.Background(), args, noEnv, stdout, stderr)
		},
		Tree: commandTree(noEnv),
		Commands: []clitest.Command{
			{Path: []string{"upload"}, Stray: []string{"--seller", "s", "a.xlsx", "b.xlsx"}, StrayArg: "b.xlsx",
				BadValue: []string{"--seller", "s", "--publish-attempts", "many", "a.xlsx"}, BadFlag: "-publish-attempts"},
			{Path: []string{"check"}, Stray: []string{"a.xlsx", "b.xlsx"}, StrayArg: "b.xlsx",
				BadValue: []string{"--max-file-size", "big", "a.xlsx"}, BadFlag: "-max-file-size"},
			{Path: []string{"status"}, Stray: []string{"id", "more"}, StrayArg: "more",
				BadValue: []string{"--poll-interval", "often", "id"}, BadFlag: "-poll-interval"},
			{Path: []string{"report"}, Stray: []string{"id", "r.xlsx", "more"}, StrayArg: "more",
				BadValue: []string{"--status-retention", "long", "id", "r.xlsx"}, BadFlag: "-status-retention"},
			{Path: []string{"template"}, Stray: []string{"a.xlsx", "b.xlsx"}, StrayArg: "b.xlsx",
				BadValue: []string{"--force=maybe", "a.xlsx"}, BadFlag: "-force"},
			{Path: []string{"serve"}, Stray: append(secret, "now"), StrayArg: "now",
				BadValue: append(secret, "--max-uploads", "many"), BadFlag: "-max-uploads"},
			{Path: []string{"token"}, Stray: append(secret, "--seller", "s", "extra"), StrayArg: "extra",
				BadValue: append(secret, "--seller", "s", "--ttl", "long"), BadFlag: "-ttl"},
			{Path: []string{"compliance"}, Stray: []string{"extra"}, StrayArg: "extra",
				BadValue: []string{"--limit", "many"}, BadFlag: "-limit"},
			{Path: []string{"redis-init"}, Stray: []string{"extra"}, StrayArg: "extra",
				BadValue: []string{"--redis-tls=maybe"}, BadFlag: "-redis-tls"},
			{Path: []string{"redrive"}, Stray: []string{"extra"}, StrayArg: "extra",
				BadValue: []string{"--scan-timeout", "long"}, BadFlag: "-scan-timeout"},
		},
	})
	// Without a subcommand: a usage error, not the help on stderr.
	var out, errb bytes.Buffer
	if code := run(context.Background(), nil, noEnv, &out, &errb); code != exitUsage || out.Len() != 0 || errb.String() != "producer: a subcommand is needed: upload, check, status, report, template, serve, …\nRun 'producer --help' for usage.\n" {
		t.Errorf("producer alone: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

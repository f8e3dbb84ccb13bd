package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/bulkreg/bulkreg/internal/cli"
	"github.com/bulkreg/bulkreg/internal/cli/clitest"
)

// TestCLIConvention: the sandbox keeps internal/cli's convention.
func TestCLIConvention(t *testing.T) {
	noEnv := func(string) string { return "" }
	fs, _, _ := bind(noEnv)
	clitest.Check(t, clitest.Binary{
		Name: "registry-sandbox",
		Run: func(args []string, stdout, stderr *bytes.Buffer) int {
			return run(context.Background(), args, noEnv, stdout, stderr)
		},
		Tree: cli.Command{Name: "registry-sandbox", Flags: fs},
		Commands: []clitest.Command{{
			Stray: []string{"serve"}, StrayArg: `"serve"`,
			BadValue: []string{"--fail-rate", "often"}, BadFlag: "-fail-rate",
		}},
	})
}

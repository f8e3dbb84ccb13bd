package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/bulkreg/bulkreg/internal/cli"
	"github.com/bulkreg/bulkreg/internal/cli/clitest"
)

// TestCLIConvention: the consumer keeps internal/cli's convention; a stray
// argument is refused before anything starts, not ignored.
func TestCLIConvention(t *testing.T) {
	noEnv := func(string) string { return "" }
	fs, _, _ := bind(noEnv)
	clitest.Check(t, clitest.Binary{
		Name: "consumer",
		Run: func(args []string, stdout, stderr *bytes.Buffer) int {
			return run(context.Background(), args, noEnv, stdout, stderr)
		},
		Tree: cli.Command{Name: "consumer", Flags: fs},
		Commands: []clitest.Command{{
			Stray: []string{"start"}, StrayArg: `"start"`,
			BadValue: []string{"--limit", "many"}, BadFlag: "-limit",
		}},
	})
}

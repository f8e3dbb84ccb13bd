package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/bulkreg/bulkreg/internal/cli/clitest"
)

// TestCLIConvention: devstack keeps internal/cli's convention.
func TestCLIConvention(t *testing.T) {
	noEnv := func(string) string { return "" }
	var cmds []clitest.Command
	for _, cmd := range []string{"up", "demo"} {
		cmds = append(cmds, clitest.Command{Path: []string{cmd},
			Stray: []string{"extra"}, StrayArg: `"extra"`,
			BadValue: []string{"--consumers", "many"}, BadFlag: "-consumers"})
	}
	clitest.Check(t, clitest.Binary{
		Name: "devstack",
		Run: func(args []string, stdout, stderr *bytes.Buffer) int {
			return run(context.Background(), args, stdout, stderr, noEnv)
		},
		Tree:     commandTree(noEnv),
		Commands: append(cmds, clitest.Command{}), // devstack alone: its help
	})
}

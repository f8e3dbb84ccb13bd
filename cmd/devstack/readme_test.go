package main

import (
	"testing"

	"github.com/bulkreg/bulkreg/internal/cli/clitest"
)

// TestREADME holds the README's settings tables to devstack's flag sets
// (issue 29, item 10): every setting up and demo take, with its default,
// and no row naming a command that does not take it.
func TestREADME(t *testing.T) {
	clitest.CheckREADME(t, "../../README.md", commandTree(func(string) string { return "" }), nil)
}

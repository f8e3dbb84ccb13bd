package main

import (
	"testing"

	"github.com/bulkreg/bulkreg/internal/cli/clitest"
)

// TestDocs holds the settings tables of docs/configuration.md to
// devstack's flag sets: every setting up and demo take, with its default,
// and no row naming a command that does not take it.
func TestDocs(t *testing.T) {
	clitest.CheckDocs(t, "../..", commandTree(func(string) string { return "" }), nil)
}

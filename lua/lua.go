// Package lua holds bulkreg's Redis scripts as .lua files, embedded so the
// binaries carry them. Each file begins with a comment giving its KEYS, ARGV
// and reply. Every key a script touches shares one hash tag, so each script
// runs on a single Redis Cluster slot.
package lua

import (
	"embed"
	"fmt"
)

//go:embed *.lua
var files embed.FS

// Script returns the body of name (for example "reserve.lua"). It panics on
// an unknown name: the set of scripts is fixed at build time, so a wrong
// name is a programming error caught by the first test that loads it.
func Script(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("lua: no embedded script %q", name))
	}
	return string(b)
}

// Package cli is the one convention every bulkreg binary keeps on its
// command line, so a script or a person can rely on it whichever binary
// they run:
//
//   - -h, -help or --help prints the full help to stdout and exits 0;
//   - a usage error (an unknown flag, a bad value, a missing or stray
//     argument, an invalid setting) prints one line "<cmd>: <what is wrong>"
//     and one hint line to stderr, and exits 2;
//   - an error while working exits 1;
//   - "<bin> completion bash|zsh|fish" prints a completion script made from
//     the binary's own flag sets.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit statuses shared by every binary.
const (
	ExitOK     = 0 // done
	ExitFailed = 1 // the work failed or found problems
	ExitUsage  = 2 // bad flags, arguments or settings: nothing was done
)

// OneLine joins the lines of a message (errors.Join puts each error on a
// line of its own) with "; ", so a usage error stays one line.
func OneLine(msg string) string {
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// Hint is the line under every usage error: where the help is.
func Hint(cmd string) string {
	return fmt.Sprintf("Run '%s --help' for usage.", cmd)
}

// UsageError prints err as a usage error of cmd ("producer upload",
// "consumer") to stderr and returns ExitUsage.
func UsageError(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "%s: %s\n%s\n", cmd, OneLine(err.Error()), Hint(cmd))
	return ExitUsage
}

// Failed prints err as the failure of cmd ("<cmd>: <err>") to stderr and
// returns ExitFailed: what every binary says when the work itself fails.
func Failed(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
	return ExitFailed
}

// Parse parses args into fs, whose name is the command ("producer upload"),
// and returns the positional arguments. Flags may come before, between or
// after them. On -h it prints fs.Usage to stdout; on a flag error it prints
// the usage error; either way ok is false and code is the exit status.
// The flag package's own message and full usage dump on an error are never
// printed.
func Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (pos []string, code int, ok bool) {
	for {
		fs.SetOutput(io.Discard)
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, ExitOK, false
		}
		if err != nil {
			return nil, UsageError(stderr, fs.Name(), err), false
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	fs.SetOutput(stdout)
	return pos, ExitOK, true
}

// ParseFlags parses args into fs for a command that takes flags only and
// prints nothing but the help: on -h it prints fs.Usage to help and returns
// flag.ErrHelp; a flag error or a stray argument (NoArgs) is returned as the
// usage error for the caller to print, after its own checks, with
// UsageError.
func ParseFlags(fs *flag.FlagSet, args []string, help io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(help)
		fs.Usage()
	}
	if err != nil {
		return err
	}
	return NoArgs(fs.Args())
}

// NoArgs is the usage error of a command that takes no arguments, naming
// the first stray one; nil when there is none.
func NoArgs(pos []string) error {
	if len(pos) == 0 {
		return nil
	}
	return fmt.Errorf("unexpected argument %q: this command takes flags only", pos[0])
}

// IsHelp tells whether arg asks for help.
func IsHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

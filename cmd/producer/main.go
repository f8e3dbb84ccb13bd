// Command producer takes a seller's spreadsheet in: it validates it, publishes
// one Kafka message per valid row and follows the upload's progress. It also
// serves the same as an HTTP upload service. Every setting is a BULKREG_*
// environment variable or a flag of the same name in kebab case
// (--kafka-brokers); `producer SUBCOMMAND -h` lists them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK      = 0
	exitFailed  = 1 // the work failed or found problems
	exitUsage   = 2 // bad flags or arguments
	exitUnknown = 2
)

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, e *cli, args []string) int
}

func commands() []command {
	return []command{
		{"upload", "--seller S [--strict] [--wait] FILE", "validate FILE, publish its valid rows and print the upload id", cmdUpload},
		{"check", "[--json] FILE", "validate FILE without publishing; exit 0 only when every row is valid", cmdCheck},
		{"status", "[--json] ID", "show an upload's counts and the reason of each failed row", cmdStatus},
		{"report", "[--failed-only] ID FILE", "write the upload's result report (.xlsx) to FILE", cmdReport},
		{"template", "FILE", "write an empty upload template (.xlsx) to FILE", cmdTemplate},
		{"serve", "", "run the HTTP upload service", cmdServe},
		{"token", "--seller S | --operator NAME [--ttl 24h]", "print a bearer token for the HTTP service (local use and demos)", cmdToken},
		{"compliance", "[--json]", "per seller: calls, most in any window, current window, 429s, exceeded", cmdCompliance},
	}
}

// cli carries what every subcommand needs from the outside world.
type cli struct {
	getenv         func(string) string
	stdout, stderr io.Writer
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: producer SUBCOMMAND [flags] [args]")
	fmt.Fprintln(w, "\nsubcommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nrun `producer SUBCOMMAND -h` for its flags; every flag is also a BULKREG_* environment variable.")
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, &cli{getenv: getenv, stdout: stdout, stderr: stderr}, args[1:])
		}
	}
	fmt.Fprintf(stderr, "producer: unknown subcommand %q\n\n", args[0])
	usage(stderr)
	return exitUnknown
}

// flagSet returns a FlagSet for a subcommand whose -h prints a useful usage.
func (e *cli) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("producer "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	for _, c := range commands() {
		if c.name == name {
			fs.Usage = func() {
				fmt.Fprintf(fs.Output(), "usage: producer %s %s\n\n%s.\n\nflags:\n", name, c.args, c.summary)
				fs.PrintDefaults()
			}
		}
	}
	return fs
}

// parseArgs parses flags that may come before, between or after the
// positional arguments, and checks the count of positional arguments.
// It returns (nil, code) when the caller must stop with code.
func (e *cli) parseArgs(fs *flag.FlagSet, args []string, want int, names string, bindErr func() error) ([]string, int, bool) {
	// flag prints the whole usage on every error; a short line naming the
	// flag is easier to act on, and -h prints the usage to stdout.
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			fs.SetOutput(e.stdout)
			if errors.Is(err, flag.ErrHelp) {
				fs.Usage()
				return nil, exitOK, false
			}
			fmt.Fprintf(e.stderr, "%s: %v (see %s -h)\n", fs.Name(), err, fs.Name())
			return nil, exitUsage, false
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if bindErr != nil {
		if err := bindErr(); err != nil {
			fmt.Fprintf(e.stderr, "%s: %v\n", fs.Name(), err)
			return nil, exitUsage, false
		}
	}
	if len(pos) != want {
		fmt.Fprintf(e.stderr, "%s: want %s, got %d argument(s) %q (see %s -h)\n", fs.Name(), names, len(pos), pos, fs.Name())
		return nil, exitUsage, false
	}
	return pos, exitOK, true
}

func (e *cli) errorf(format string, args ...any) int {
	fmt.Fprintf(e.stderr, "producer: "+format+"\n", args...)
	return exitFailed
}

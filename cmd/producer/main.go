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
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg/internal/buildinfo"
	"github.com/bulkreg/bulkreg/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses: internal/cli's, the same in every binary.
const (
	exitOK     = cli.ExitOK
	exitFailed = cli.ExitFailed // the work failed or found problems
	exitUsage  = cli.ExitUsage  // bad flags, arguments or settings
)

type command struct {
	name, args, summary string
	// details is what -h adds under the summary: what the command prints
	// and its exit statuses, so a script can rely on them.
	details string
	run     func(ctx context.Context, e *env, args []string) int
}

func commands() []command {
	return []command{
		{"upload", "--seller S [--strict] [--wait] FILE", "validate FILE, publish its valid rows and print the upload id",
			`FILE is an .xlsx workbook or a text file Excel saves: CSV, or separated by
tabs ("Unicode text", "Text (Tab delimited)") or semicolons; in UTF-8 (with or
without a byte-order mark), UTF-16 after a byte-order mark, or CP949 as Korean
Excel saves "CSV"; the type is told by the content.
Each valid row becomes one message on the rows topic (key = the seller),
acknowledged by all in-sync replicas; invalid rows are listed on stderr and
recorded as failed with their reasons (--strict refuses the whole file instead).
The upload id comes from the seller and the file's SHA-256: the same file again
is reported as a duplicate of the earlier upload and nothing is published twice.
If publishing fails part way, send the same file again: same id, same rows.
A row whose seller_sku the seller registered before is not published: with the
same content it is "already registered" (with its product id); with other
content it is a problem on its SKU cell (bulk registration only adds products).

exit status: 0 published (with --wait: every row registered or already
registered); 1 the file was refused, publishing failed, or (with --wait) some
row failed; 2 bad flags or arguments.`, cmdUpload},
		{"check", "[--json] FILE", "validate FILE without publishing; exit 0 only when every row is valid",
			`FILE is an .xlsx workbook or a CSV file, as for upload. Prints each problem
as "CELL: message" and a summary line; warnings (unknown
columns, hidden rows, merged cells) go to stderr. With --json, one JSON object
per line and problem: {"row", "column", "cell", "code", "message"}; a refused
file gives one object per missing or repeated column, or one with row 0 naming
the reason.

check refuses what upload refuses, for the same reason: a file with a header
row and no product rows (an untouched template) is refused (no_rows).

exit status: 0 every row is valid, so upload would publish them all; 1 some
row has a problem, or the file is refused or cannot be read; 2 bad flags or
arguments.`, cmdCheck},
		{"status", "[--json] [--wait] ID", "show an upload's counts and the reason of each failed row",
			`Counts: registered (by this upload), already registered (the seller registered
the same product before; nothing sent again), failed and waiting.

exit status: 0 shown (with --wait: every row registered or already
registered); 1 no such upload, Redis cannot be reached, or (with --wait) some
row failed; 2 bad flags or arguments.`, cmdStatus},
		{"report", "[--failed-only] [--force] ID FILE", "write the upload's result report (.xlsx) to FILE",
			`The report holds the seller's columns, then the original row number, the
result (registered, already_registered, failed or waiting) and the reason (for
already_registered: the existing product). Text a spreadsheet could run as a
formula (starting with = + - @ or a tab) is written as it is, with Excel's
quote-prefix style: shown and kept as text, never run. Only the known columns
are in it; valid numbers are number cells. A reason names each problem by
the report's own cell and the original row ("D2: ... (original row 3)"), and
a failed row's cells to fix are filled and carry the reason as a note. With
--failed-only the file holds the failed rows only and, once fixed, can be
uploaded again as it is (already registered rows are left out).
An existing FILE is refused unless --force is given (it may be the seller's
fixed copy); FILE is written whole or not at all.

exit status: 0 written; 1 no such upload, Redis cannot be reached, FILE exists
(without --force) or cannot be written; 2 bad flags or arguments.`, cmdReport},
		{"template", "[--force] [--categories-file F] FILE", "write an empty upload template (.xlsx) to FILE",
			`The template has a product sheet, with its header row frozen, its text
columns formatted as text and a check on every column from its rule (whole
numbers within range, lengths, a SKU without spaces and once, an address
starting with http:// or https://); an instructions sheet with the rules and
an example row; and, with --categories-file, a sheet of the categories, whose
codes the category column then takes from a list.
The product sheet has no rows yet: upload and check refuse the template as it
is (no_rows) until product rows are filled in.
An existing FILE is refused unless --force is given; FILE is written whole
(a temporary file renamed over it) or not at all.

exit status: 0 written; 1 FILE exists (without --force) or cannot be written;
2 bad flags or arguments, or a categories file that cannot be read or holds
a bad line.`, cmdTemplate},
		{"serve", "", "run the HTTP upload service",
			`Sellers' pages (sign in with a link from "producer token --seller S --link"):
  /upload (check and register a file), /uploads (history), /uploads/{id} (live progress)
API (the seller comes from the bearer token or the session, never from the form;
errors are application/problem+json; the OpenAPI 3.1 document is at /v1/openapi.json):
  POST /v1/uploads                   multipart/form-data, the file (.xlsx, or .csv/.txt/.tsv text) in the field "file"; ?strict=true, ?dry_run=true
  GET  /v1/uploads                   the seller's uploads, newest first; ?limit=, ?cursor=
  GET  /v1/uploads/{id}              the upload's status, with eta and rows_waiting
  GET  /v1/uploads/{id}/events       the upload's progress as server-sent events
  GET  /v1/uploads/{id}/report.xlsx  the result report; ?failed_only=true
  GET  /v1/template.xlsx             the upload template
  GET  /v1/compliance                the compliance report (operator tokens)
On --admin-addr only: GET /metrics; GET /livez, 200 while the process serves
(a liveness probe); GET /readyz, 200 while Redis answers and a Kafka broker names
the rows topic with its leaders (checked every --readiness-interval, each check at
most --readiness-timeout), else 503 naming what is not ready (a readiness probe);
GET /healthz, 200 "ok" while Redis answers a PING made at the request, else 503.

Runs until SIGINT or SIGTERM, then finishes the requests in progress
(--shutdown-timeout). exit status: 0 stopped cleanly; 1 cannot listen or
shutdown failed; 2 bad flags.`, cmdServe},
		{"token", "--seller S [--link] | --operator NAME [--ttl D]", "print a bearer token, or a seller's sign-in link, for the HTTP service",
			`The token is signed with --jwt-secret, the secret serve checks tokens with
(an operator's with --jwt-operator-secret). With --link it prints a sign-in link
instead: --public-url + /signin?token=…, valid for --ttl (10m; at most
--link-max-age) and usable once; opening it signs the seller in to the pages.`, cmdToken},
		{"compliance", "[--json]", "per seller: calls, most in any window, current window, 429s, exceeded",
			`A seller whose history Redis lost (a restart without persistence, FLUSHALL, a
failover to a replica that missed the last writes) is marked NOT COVERED from
the start of the period to the moment the loss was found: its counts speak only
for the calls the history still holds.

exit status: 0 no seller exceeded the limit in any window and every history
covers the whole period; 1 some seller did, part of the history was lost, or
Redis cannot be reached; 2 bad flags.`, cmdCompliance},
		{"redis-init", "", "prepare a new Redis for the throttle (once, before the first consumer starts)", redisInitDetails, cmdRedisInit},
		{"redrive", "[--dry-run] [--upload ID] [--seller S] [--class C,…] [--since T] [--until T]",
			"send dead-lettered rows to the rows topic again (after an outage or a fixed fault)", redriveDetails, cmdRedrive},
		{"delete-upload", "--seller S ID...", "delete uploads of a seller from Redis, giving back their share", deleteUploadDetails, cmdDeleteUpload},
	}
}

// env carries what every subcommand needs from the outside world.
type env struct {
	getenv         func(string) string
	stdout, stderr io.Writer
	// collect, when set, receives the subcommand's flag set, bound and
	// not parsed, and the subcommand stops there: shell completion and
	// the docs' check (TestDocs) read the flags every subcommand really takes.
	collect func(*flag.FlagSet)
	// registered, when set, receives serve's metrics registry once every
	// collector is on it, and serve stops there without listening:
	// the docs' check reads what the upload service really exports.
	registered func(*prometheus.Registry)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: producer SUBCOMMAND [flags] [args]")
	fmt.Fprintln(w, "\nsubcommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-13s %s\n", "completion", "print a shell completion script: producer completion bash|zsh|fish")
	fmt.Fprintln(w, "\nrun `producer SUBCOMMAND -h` for its flags; every flag is also a BULKREG_* environment variable.")
	fmt.Fprintln(w, "`producer --version` prints the build.")
	fmt.Fprintln(w, "\nexit status: 0 done; 1 the work failed or found problems; 2 bad flags, arguments or settings.")
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return cli.UsageError(stderr, "producer", errors.New("a subcommand is needed: upload, check, status, report, template, serve, …"))
	}
	if cli.IsHelp(args[0]) {
		usage(stdout)
		return exitOK
	}
	if buildinfo.Requested(args) || args[0] == "version" {
		fmt.Fprintln(stdout, buildinfo.Line("producer"))
		return exitOK
	}
	if args[0] == "completion" {
		return cli.RunCompletion(commandTree(getenv), args[1:], stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, &env{getenv: getenv, stdout: stdout, stderr: stderr}, args[1:])
		}
	}
	return cli.UsageError(stderr, "producer", fmt.Errorf("unknown subcommand %q", args[0]))
}

// commandTree is the producer's subcommands with the flag sets they parse.
func commandTree(getenv func(string) string) cli.Command {
	root := cli.Command{Name: "producer"}
	for _, c := range commands() {
		var fs *flag.FlagSet
		c.run(context.Background(), &env{getenv: getenv, stdout: io.Discard, stderr: io.Discard, collect: func(f *flag.FlagSet) { fs = f }}, nil)
		root.Commands = append(root.Commands, cli.Command{Name: c.name, Summary: c.summary, Flags: fs, Files: strings.Contains(c.args, "FILE")})
	}
	return root
}

// flagSet returns a FlagSet for a subcommand whose -h prints a useful usage.
func (e *env) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("producer "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	for _, c := range commands() {
		if c.name == name {
			fs.Usage = func() {
				w := fs.Output()
				fmt.Fprintf(w, "usage: %s\n\n%s.\n", strings.TrimSpace("producer "+name+" "+c.args), c.summary)
				if c.details != "" {
					fmt.Fprintf(w, "\n%s\n", c.details)
				}
				hasFlags := false
				fs.VisitAll(func(*flag.Flag) { hasFlags = true })
				if hasFlags {
					fmt.Fprintln(w, "\nflags:")
					fs.PrintDefaults()
				}
			}
		}
	}
	return fs
}

// atLeastOne is parseArgs's want for one or more positional arguments.
const atLeastOne = -1

// parseArgs parses flags that may come before, between or after the
// positional arguments, and checks the count of positional arguments
// (want, or with atLeastOne any number but none).
// It returns ok false when the caller must stop with code: after -h (0) or
// a usage error (2), printed as internal/cli prints every binary's.
func (e *env) parseArgs(fs *flag.FlagSet, args []string, want int, names string, bindErr func() error) ([]string, int, bool) {
	if e.collect != nil {
		e.collect(fs)
		return nil, exitOK, false
	}
	pos, code, ok := cli.Parse(fs, args, e.stdout, e.stderr)
	if !ok {
		return nil, code, false
	}
	if want == atLeastOne && len(pos) == 0 {
		return nil, cli.UsageError(e.stderr, fs.Name(), fmt.Errorf("want %s, got none", names)), false
	}
	if want != atLeastOne && len(pos) != want {
		if want == 0 {
			return nil, cli.UsageError(e.stderr, fs.Name(), cli.NoArgs(pos)), false
		}
		return nil, cli.UsageError(e.stderr, fs.Name(), fmt.Errorf("want %s, got %d argument(s) %q", names, len(pos), pos)), false
	}
	if bindErr != nil {
		if err := bindErr(); err != nil {
			return nil, cli.UsageError(e.stderr, fs.Name(), err), false
		}
	}
	return pos, exitOK, true
}

func (e *env) errorf(format string, args ...any) int {
	return cli.Failed(e.stderr, "producer", fmt.Errorf(format, args...))
}

package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		code           int
		ok             bool
		pos            []string
		stdout, stderr string
	}{
		{args: []string{"a", "--n", "3", "b"}, ok: true, pos: []string{"a", "b"}},
		{args: []string{"-h"}, stdout: "usage: tool run"},
		{args: []string{"--help"}, stdout: "usage: tool run"},
		{args: []string{"--nope"}, code: ExitUsage, stderr: "tool run: flag provided but not defined: -nope\nRun 'tool run --help' for usage.\n"},
		{args: []string{"--n", "many"}, code: ExitUsage, stderr: "tool run: invalid value \"many\" for flag -n: parse error\nRun 'tool run --help' for usage.\n"},
	} {
		fs := flag.NewFlagSet("tool run", flag.ContinueOnError)
		fs.Int("n", 0, "a number")
		fs.Usage = func() { fs.Output().Write([]byte("usage: tool run\n")) }
		var out, errb bytes.Buffer
		pos, code, ok := Parse(fs, tc.args, &out, &errb)
		if code != tc.code || ok != tc.ok || strings.Join(pos, ",") != strings.Join(tc.pos, ",") ||
			!strings.Contains(out.String(), tc.stdout) || (tc.stdout == "" && out.Len() > 0) || errb.String() != tc.stderr {
			t.Errorf("Parse(%q) = %q, %d, %v, stdout %q, stderr %q", tc.args, pos, code, ok, out.String(), errb.String())
		}
	}
}

func TestUsageErrorIsOneLine(t *testing.T) {
	var errb bytes.Buffer
	code := UsageError(&errb, "consumer", errors.Join(errors.New("--limit: must be > 0"), errors.New("--window: must be > 0")))
	if want := "consumer: --limit: must be > 0; --window: must be > 0\nRun 'consumer --help' for usage.\n"; code != ExitUsage || errb.String() != want {
		t.Errorf("exit %d, %q; want 2, %q", code, errb.String(), want)
	}
}

func TestFailed(t *testing.T) {
	var errb bytes.Buffer
	if code := Failed(&errb, "devstack demo", errors.New("2 rows were not registered")); code != ExitFailed || errb.String() != "devstack demo: 2 rows were not registered\n" {
		t.Errorf("exit %d, %q; want 1, %q", code, errb.String(), "devstack demo: 2 rows were not registered\n")
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		err, stdout  string
		help, parsed bool
	}{
		{args: []string{"--n", "3"}, parsed: true},
		{args: []string{"-h"}, err: "flag: help requested", stdout: "usage: tool", help: true},
		{args: []string{"--nope"}, err: "flag provided but not defined: -nope"},
		{args: []string{"--n", "3", "start"}, err: `unexpected argument "start": this command takes flags only`},
	} {
		fs := flag.NewFlagSet("tool", flag.ContinueOnError)
		n := fs.Int("n", 0, "a number")
		fs.Usage = func() { fs.Output().Write([]byte("usage: tool\n")) }
		var out bytes.Buffer
		err := ParseFlags(fs, tc.args, &out)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.err || errors.Is(err, flag.ErrHelp) != tc.help || !strings.Contains(out.String(), tc.stdout) ||
			(tc.stdout == "" && out.Len() > 0) || (*n == 3) != (tc.parsed || len(tc.args) > 2) {
			t.Errorf("ParseFlags(%q) = %v, stdout %q, n %d", tc.args, err, out.String(), *n)
		}
	}
}

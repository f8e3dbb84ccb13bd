package clitest

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg/internal/cli"
	"github.com/bulkreg/bulkreg/internal/config"
)

// The documentation's tables, as the check reads them: the settings tables
// of docs/configuration.md and the metrics table of docs/operations.md
// (DocFiles).
//
// Settings tables have the columns flag | environment variable | default |
// meaning | read by. "read by" lists who reads the setting: a binary
// without subcommands by its name ("consumer"), one with subcommands by its
// name and theirs ("producer (serve/upload)"). A default cell holds the
// default in backquotes, "—" or "(empty)" for none; when it differs between
// readers, one line per reader ("consumer: `45s`<br>producer: `30s`"), each
// naming a reader as "read by" does or a binary for all its subcommands.
//
// The metrics table has the columns metric | type | labels | meaning |
// exported by; labels are comma-separated, "—" for none.

// DocFiles are the pages, relative to the repository's root, whose tables
// the check reads.
var DocFiles = []string{"docs/configuration.md", "docs/operations.md"}

// Setting is one row of a settings table.
type Setting struct {
	File     string // the page, as the check was given it
	Line     int
	Flag     string // without dashes
	Env      string
	Defaults []Default
	Readers  []string // "consumer", "producer serve"
}

// Default is one reader's default, or everyone's when Reader is "".
type Default struct {
	Reader string
	Value  string
}

// Metric is one row of the metrics table.
type Metric struct {
	File       string
	Line       int
	Name, Type string
	Labels     []string
	Exporters  []string
}

// Docs are the tables the check reads from the documentation.
type Docs struct {
	Settings []Setting
	Metrics  []Metric
}

var (
	backquoted = regexp.MustCompile("`([^`]*)`")
	readerRe   = regexp.MustCompile(`^([a-z-]+)(?: \(([a-z/-]+)\))?$`)
)

func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	var out []string
	for _, c := range strings.Split(line, " | ") {
		out = append(out, strings.TrimSpace(c))
	}
	return out
}

func unquote(cell string) string {
	if m := backquoted.FindStringSubmatch(cell); m != nil {
		return m[1]
	}
	return cell
}

// ParseReaders reads a "read by" cell.
func ParseReaders(cell string) ([]string, error) {
	var out []string
	for _, part := range splitTop(cell) {
		m := readerRe.FindStringSubmatch(part)
		if m == nil {
			return nil, fmt.Errorf("read by %q: want a binary, or a binary and its subcommands in parentheses (producer (serve/upload))", part)
		}
		if m[2] == "" {
			out = append(out, m[1])
			continue
		}
		for _, sub := range strings.Split(m[2], "/") {
			out = append(out, m[1]+" "+sub)
		}
	}
	return out, nil
}

// splitTop splits a cell on the commas outside parentheses.
func splitTop(cell string) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range cell {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, strings.TrimSpace(cell[start:i]))
				start = i + 1
			}
		}
	}
	return append(parts, strings.TrimSpace(cell[start:]))
}

func parseDefaults(cell string) ([]Default, error) {
	var out []Default
	for _, part := range strings.Split(cell, "<br>") {
		part = strings.TrimSpace(part)
		reader := ""
		if i := strings.Index(part, ": "); i > 0 && !strings.Contains(part[:i], "`") {
			reader, part = part[:i], strings.TrimSpace(part[i+2:])
		}
		var v string
		switch m := backquoted.FindStringSubmatch(part); {
		case m != nil:
			v = m[1]
		case part == "—" || part == "(empty)":
		default:
			return nil, fmt.Errorf("default %q: want the value in backquotes, or — for none", part)
		}
		out = append(out, Default{Reader: reader, Value: v})
	}
	return out, nil
}

// ReadDocs reads the settings and metrics tables of the pages at paths
// (DocFiles under the repository's root). A page that holds no such table
// is an error: the tables moved, and the check would hold nothing.
func ReadDocs(paths ...string) (Docs, error) {
	var r Docs
	var errs []string
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			return r, err
		}
		if tables := readTables(&r, path, string(raw), &errs); tables == 0 {
			errs = append(errs, fmt.Sprintf("%s holds no settings or metrics table", path))
		}
	}
	if len(errs) > 0 {
		return r, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return r, nil
}

// readTables adds the rows of the tables in text, the page at path, to r
// and what is wrong with them to errs, and returns how many tables it found.
func readTables(r *Docs, path, text string, errs *[]string) int {
	kind, tables := "", 0
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if !strings.HasPrefix(line, "|") {
			kind = ""
			continue
		}
		c := cells(line)
		switch {
		case len(c) >= 3 && c[0] == "flag" && c[1] == "environment variable":
			if len(c) != 5 || c[2] != "default" || c[4] != "read by" {
				*errs = append(*errs, fmt.Sprintf("%s:%d: a settings table has the columns flag | environment variable | default | meaning | read by", path, n))
			}
			kind = "settings"
			tables++
			continue
		case len(c) >= 2 && c[0] == "metric" && c[1] == "type":
			if len(c) != 5 || c[2] != "labels" || c[4] != "exported by" {
				*errs = append(*errs, fmt.Sprintf("%s:%d: the metrics table has the columns metric | type | labels | meaning | exported by", path, n))
			}
			kind = "metrics"
			tables++
			continue
		case strings.HasPrefix(line, "|---"), kind == "":
			continue
		}
		switch kind {
		case "settings":
			if len(c) != 5 {
				*errs = append(*errs, fmt.Sprintf("%s:%d: %d columns, want 5 (flag | environment variable | default | meaning | read by)", path, n, len(c)))
				continue
			}
			s := Setting{File: path, Line: n, Flag: strings.TrimPrefix(unquote(c[0]), "--"), Env: unquote(c[1])}
			if strings.Contains(c[0], ",") || strings.Contains(c[1], ",") {
				*errs = append(*errs, fmt.Sprintf("%s:%d: one flag a row (%s)", path, n, c[0]))
				continue
			}
			var err error
			if s.Defaults, err = parseDefaults(c[2]); err != nil {
				*errs = append(*errs, fmt.Sprintf("%s:%d (--%s): %v", path, n, s.Flag, err))
			}
			if s.Readers, err = ParseReaders(c[4]); err != nil {
				*errs = append(*errs, fmt.Sprintf("%s:%d (--%s): %v", path, n, s.Flag, err))
			}
			r.Settings = append(r.Settings, s)
		case "metrics":
			if len(c) != 5 {
				*errs = append(*errs, fmt.Sprintf("%s:%d: %d columns, want 5 (metric | type | labels | meaning | exported by)", path, n, len(c)))
				continue
			}
			m := Metric{File: path, Line: n, Name: unquote(c[0]), Type: c[1]}
			if c[2] != "—" {
				for _, l := range strings.Split(c[2], ",") {
					m.Labels = append(m.Labels, strings.TrimSpace(l))
				}
			}
			for _, e := range strings.Split(c[4], ",") {
				m.Exporters = append(m.Exporters, strings.TrimSpace(e))
			}
			r.Metrics = append(r.Metrics, m)
		}
	}
	return tables
}

// envOf is the variable a flag's usage names ("… (env BULKREG_X)"); "" for
// a flag that is not a setting (--seller, --json: an argument of one run).
var envOf = regexp.MustCompile(`\(env (BULKREG_[A-Z0-9_]+)`)

// Settings are the settings each reader of binary tree takes, from the flag
// sets it parses: reader ("consumer", "producer serve") → flag → the flag.
func Settings(tree cli.Command) map[string]map[string]*flag.Flag {
	out := map[string]map[string]*flag.Flag{}
	add := func(reader string, fs *flag.FlagSet) {
		out[reader] = map[string]*flag.Flag{}
		if fs == nil {
			return
		}
		fs.VisitAll(func(f *flag.Flag) {
			if envOf.MatchString(f.Usage) {
				out[reader][f.Name] = f
			}
		})
	}
	if len(tree.Commands) == 0 {
		add(tree.Name, tree.Flags)
	}
	for _, c := range tree.Commands {
		add(tree.Name+" "+c.Name, c.Flags)
	}
	return out
}

// sameValue tells whether a documented default and a flag's default agree:
// equal text, or equal durations or numbers written differently (1m,
// 1m0s).
func sameValue(doc, code string) bool {
	if doc == code {
		return true
	}
	if a, err := time.ParseDuration(doc); err == nil {
		b, err := time.ParseDuration(code)
		return err == nil && a == b
	}
	if a, err := strconv.ParseFloat(doc, 64); err == nil {
		b, err := strconv.ParseFloat(code, 64)
		return err == nil && a == b
	}
	return false
}

func (s Setting) defaultFor(reader string) (string, bool) {
	for _, d := range s.Defaults {
		bin, _, _ := strings.Cut(reader, " ")
		if d.Reader == "" || d.Reader == reader || d.Reader == bin {
			return d.Value, true
		}
	}
	return "", false
}

// CheckSettings compares the documented settings with the binary's: every
// setting a reader of the binary takes has a row whose "read by" names that
// reader and whose default is the flag's; every row naming a reader is a
// setting the reader takes; each row's variable is its flag's. It returns
// one line per difference.
func CheckSettings(r Docs, tree cli.Command) []string {
	code := Settings(tree)
	var problems []string
	documented := map[string]map[string]Setting{} // reader → flag → row
	for _, s := range r.Settings {
		if want := config.EnvName(s.Flag); s.Env != want {
			problems = append(problems, fmt.Sprintf("%s:%d: --%s's variable is %s, not %s", s.File, s.Line, s.Flag, want, s.Env))
		}
		for _, reader := range s.Readers {
			bin, _, _ := strings.Cut(reader, " ")
			if bin != tree.Name {
				continue
			}
			if _, ok := code[reader]; !ok {
				problems = append(problems, fmt.Sprintf("%s:%d: --%s is read by %q, which is not a command of %s", s.File, s.Line, s.Flag, reader, tree.Name))
				continue
			}
			if documented[reader] == nil {
				documented[reader] = map[string]Setting{}
			}
			if prev, dup := documented[reader][s.Flag]; dup {
				problems = append(problems, fmt.Sprintf("%s:%d: --%s for %s is also on line %d", s.File, s.Line, s.Flag, reader, prev.Line))
			}
			documented[reader][s.Flag] = s
		}
	}
	readers := make([]string, 0, len(code))
	for reader := range code {
		readers = append(readers, reader)
	}
	sort.Strings(readers)
	for _, reader := range readers {
		var names []string
		for name := range code[reader] {
			names = append(names, name)
		}
		for name := range documented[reader] {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			f, row := code[reader][name], documented[reader][name]
			switch {
			case f == nil:
				problems = append(problems, fmt.Sprintf("%s:%d: --%s says it is read by %s, whose -h has no such setting: take %s out of its \"read by\"", row.File, row.Line, name, reader, reader))
			case row.Line == 0:
				problems = append(problems, fmt.Sprintf("%s reads --%s (%s, default %q), which no settings row of the docs names in its \"read by\"", reader, name, config.EnvName(name), f.DefValue))
			default:
				if d, ok := row.defaultFor(reader); !ok {
					problems = append(problems, fmt.Sprintf("%s:%d: --%s has no default for %s", row.File, row.Line, name, reader))
				} else if !sameValue(d, f.DefValue) {
					problems = append(problems, fmt.Sprintf("%s:%d: --%s's default for %s is %q in the docs, %q in -h", row.File, row.Line, name, reader, d, f.DefValue))
				}
			}
		}
	}
	return problems
}

// ExportedMetric is one metric a binary exports, with its labels and, when
// it has a series yet, its type.
type ExportedMetric struct {
	Name   string
	Type   string // counter, gauge, histogram, summary; "" when not known
	Labels []string
}

var (
	descName   = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
	descConst  = regexp.MustCompile(`constLabels: \{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\}`)
	constPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)
)

// Registered lists every metric reg describes, those without a series yet
// included (a vector no label has been used with, a collector of partitions
// not yet owned), with the type of those it gathers.
func Registered(reg *prometheus.Registry) ([]ExportedMetric, error) {
	types := map[string]string{}
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	for _, mf := range mfs {
		types[mf.GetName()] = strings.ToLower(mf.GetType().String())
	}
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	var out []ExportedMetric
	for d := range ch {
		ds := d.String()
		m := descName.FindStringSubmatch(ds)
		if m == nil {
			return nil, fmt.Errorf("cannot read the name of %s", ds)
		}
		e := ExportedMetric{Name: m[1], Type: types[m[1]]}
		if l := descConst.FindStringSubmatch(ds); l != nil {
			for _, kv := range constPair.FindAllStringSubmatch(l[1], -1) {
				e.Labels = append(e.Labels, kv[1])
			}
		}
		if l := descLabels.FindStringSubmatch(ds); l != nil && l[1] != "" {
			for _, name := range strings.Split(l[1], ",") {
				e.Labels = append(e.Labels, strings.TrimSuffix(strings.TrimPrefix(name, "c("), ")"))
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// CheckMetrics compares the documented metrics table with the bulkreg_*
// metrics binary exports: each has a row naming the binary in "exported by"
// with the same labels, and each row naming the binary is a metric it
// exports.
func CheckMetrics(r Docs, binary string, exported []ExportedMetric) []string {
	var problems []string
	rows := map[string]Metric{}
	for _, m := range r.Metrics {
		if slices.Contains(m.Exporters, binary) {
			rows[m.Name] = m
		}
	}
	seen := map[string]bool{}
	for _, e := range exported {
		if !strings.HasPrefix(e.Name, "bulkreg_") {
			continue
		}
		seen[e.Name] = true
		row, ok := rows[e.Name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s exports %s (labels %v), which no metrics row of the docs names in \"exported by\"", binary, e.Name, e.Labels))
			continue
		}
		if e.Type != "" && row.Type != e.Type {
			problems = append(problems, fmt.Sprintf("%s:%d: %s is a %s in the docs, a %s in %s", row.File, row.Line, e.Name, row.Type, e.Type, binary))
		}
		a, b := slices.Clone(row.Labels), slices.Clone(e.Labels)
		sort.Strings(a)
		sort.Strings(b)
		if !slices.Equal(a, b) {
			problems = append(problems, fmt.Sprintf("%s:%d: %s's labels are %v in the docs, %v in %s", row.File, row.Line, e.Name, row.Labels, e.Labels, binary))
		}
	}
	for name, row := range rows {
		if !seen[name] {
			problems = append(problems, fmt.Sprintf("%s:%d: %s says %s exports it, which %s does not", row.File, row.Line, name, binary, binary))
		}
	}
	sort.Strings(problems)
	return problems
}

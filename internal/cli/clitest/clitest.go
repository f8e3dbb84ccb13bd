// Package clitest holds every bulkreg binary to internal/cli's convention
// with one table of cases, run by each binary's own tests against its run
// function.
package clitest

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/bulkreg/bulkreg/internal/cli"
)

// Command is one way to invoke a binary: its subcommand path (none for a
// binary without subcommands) and argument lists that must be refused.
type Command struct {
	Path     []string // "upload"; empty for the binary itself
	Stray    []string // arguments (after Path) with one too many: refused as a usage error naming the stray one
	StrayArg string   // the argument that error names
	BadValue []string // arguments (after Path) with a flag's malformed value: refused naming the flag
	BadFlag  string   // the flag that error names, as given ("--limit")
}

// Binary is what Check needs of one binary.
type Binary struct {
	Name     string
	Run      func(args []string, stdout, stderr *bytes.Buffer) int
	Tree     cli.Command // from the same flag sets the binary parses
	Commands []Command
}

type result struct {
	code           int
	stdout, stderr string
}

func (b Binary) run(args ...string) result {
	var out, errb bytes.Buffer
	code := b.Run(args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// usageError checks r is a usage error of cmd in the convention: exit 2,
// nothing on stdout, exactly "<cmd>: <message>" and the hint on stderr, the
// message holding want.
func usageError(t *testing.T, what, cmd string, r result, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	ok := r.code == cli.ExitUsage && r.stdout == "" && len(lines) == 2 &&
		strings.HasPrefix(lines[0], cmd+": ") && strings.Contains(lines[0], want) && lines[1] == cli.Hint(cmd)
	if !ok {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout and on stderr two lines: %q naming %q, then %q",
			what, r.code, r.stdout, r.stderr, cmd+": …", want, cli.Hint(cmd))
	}
}

// Check runs the convention's cases on b.
func Check(t *testing.T, b Binary) {
	t.Helper()
	for _, c := range b.Commands {
		cmd := strings.Join(append([]string{b.Name}, c.Path...), " ")
		with := func(args ...string) []string { return append(append([]string(nil), c.Path...), args...) }
		for _, h := range []string{"-h", "--help"} {
			r := b.run(with(h)...)
			if r.code != cli.ExitOK || r.stderr != "" || !strings.Contains(strings.ToLower(r.stdout), "usage") {
				t.Errorf("%s %s: exit %d, stderr %q, stdout %.80q…; want exit 0, the help on stdout and nothing on stderr", cmd, h, r.code, r.stderr, r.stdout)
			}
		}
		usageError(t, cmd+" --no-such-flag", cmd, b.run(with("--no-such-flag")...), "no-such-flag")
		if c.Stray != nil {
			usageError(t, cmd+" with a stray argument", cmd, b.run(with(c.Stray...)...), c.StrayArg)
		}
		if c.BadValue != nil {
			usageError(t, cmd+" with a malformed value", cmd, b.run(with(c.BadValue...)...), c.BadFlag)
		}
	}
	root := b.Name
	if len(b.Tree.Commands) > 0 {
		usageError(t, root+" with an unknown subcommand", root, b.run("no-such-command"), "no-such-command")
	}
	usageError(t, root+" completion", root+" completion", b.run("completion"), "want one shell")
	usageError(t, root+" completion tcsh", root+" completion", b.run("completion", "tcsh"), "tcsh")
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := b.run("completion", sh)
		if r.code != cli.ExitOK || r.stderr != "" {
			t.Errorf("%s completion %s: exit %d, stderr %q", root, sh, r.code, r.stderr)
			continue
		}
		for _, c := range append([]cli.Command{b.Tree}, b.Tree.Commands...) {
			if c.Name != b.Tree.Name && !strings.Contains(r.stdout, c.Name) {
				t.Errorf("%s completion %s does not offer the subcommand %s", root, sh, c.Name)
			}
			if c.Flags == nil {
				continue
			}
			for _, name := range cli.FlagNames(c.Flags) {
				if sh == "fish" {
					name = "-l " + name + " " // fish names long options without their dashes
				} else {
					name = "--" + name
				}
				if !strings.Contains(r.stdout, name) {
					t.Errorf("%s completion %s does not offer %s's flag %s", root, sh, c.Name, name)
				}
			}
		}
		switch sh {
		case "bash":
			bashCompletes(t, b.Tree, r.stdout)
		case "zsh":
			shellReads(t, b.Name, "zsh", r.stdout, "-n", "/dev/stdin")
		case "fish":
			shellReads(t, b.Name, "fish", r.stdout, "-n")
			fishCompletes(t, b.Tree, r.stdout)
		}
	}
}

// bashCompletes has bash source the script and complete the start of a
// flag of the first command that has flags: the script must offer it.
func bashCompletes(t *testing.T, root cli.Command, script string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Logf("no bash here: the completion script is not tried")
		return
	}
	words := []string{root.Name}
	c := root
	for _, sub := range root.Commands {
		if sub.Flags != nil {
			c, words = sub, append(words, sub.Name)
			break
		}
	}
	flag := "--" + cli.FlagNames(c.Flags)[0]
	words = append(words, flag[:min(len(flag), 5)])
	probe := fmt.Sprintf("%s\nCOMP_WORDS=(%s); COMP_CWORD=%d; %s; printf '%%s\\n' \"${COMPREPLY[@]}\"\n",
		script, strings.Join(words, " "), len(words)-1, "_bulkreg_"+strings.ReplaceAll(root.Name, "-", "_"))
	cmd := exec.Command(bash, "--norc", "--noprofile")
	cmd.Stdin = strings.NewReader(probe)
	out, err := cmd.CombinedOutput()
	if err != nil || !slices.Contains(strings.Split(string(out), "\n"), flag) {
		t.Errorf("bash, completing %q with %s completion bash: %v, offered %q; want %s among them", strings.Join(words, " "), root.Name, err, out, flag)
	}
}

// shellReads has shell parse the script without running it, when the
// shell is installed.
func shellReads(t *testing.T, bin, shell, script string, args ...string) {
	t.Helper()
	path, err := exec.LookPath(shell)
	if err != nil {
		t.Logf("no %s here: %s completion %s is not parsed", shell, bin, shell)
		return
	}
	cmd := exec.Command(path, args...)
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s cannot read %s completion %s: %v\n%s", shell, bin, shell, err, out)
	}
}

// fishCompletes has fish load the script and complete the start of the
// first flag of the first command that has flags.
func fishCompletes(t *testing.T, root cli.Command, script string) {
	t.Helper()
	fish, err := exec.LookPath("fish")
	if err != nil {
		return
	}
	words, c := []string{root.Name}, root
	for _, sub := range root.Commands {
		if sub.Flags != nil {
			c, words = sub, append(words, sub.Name)
			break
		}
	}
	flag := "--" + cli.FlagNames(c.Flags)[0]
	line := strings.Join(append(words, flag[:min(len(flag), 5)]), " ")
	cmd := exec.Command(fish, "--no-config", "-c", "source; complete -C '"+line+"'")
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	var offered []string
	for _, l := range strings.Split(string(out), "\n") {
		offered = append(offered, strings.SplitN(l, "\t", 2)[0])
	}
	if err != nil || !slices.Contains(offered, flag) {
		t.Errorf("fish, completing %q with %s completion fish: %v, offered %q; want %s among them", line, root.Name, err, out, flag)
	}
}

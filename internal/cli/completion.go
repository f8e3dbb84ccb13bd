package cli

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Command describes a binary, or one of its subcommands, for completion.
// Flags are the very FlagSet the command parses, so a script never offers a
// flag the command does not take.
type Command struct {
	Name     string
	Summary  string
	Flags    *flag.FlagSet // nil: no flags
	Files    bool          // its arguments are file names
	Commands []Command     // subcommands
}

// Shells are the shells Completion writes scripts for.
var Shells = []string{"bash", "zsh", "fish"}

// RunCompletion is "<bin> completion SHELL": it prints the script of root
// to stdout, or a usage error when SHELL is missing or unknown.
func RunCompletion(root Command, args []string, stdout, stderr io.Writer) int {
	cmd := root.Name + " completion"
	if len(args) == 1 && IsHelp(args[0]) {
		fmt.Fprintf(stdout, "usage: %s bash|zsh|fish\n\nPrints a completion script for the shell, made from %s's flags. For example:\n"+
			"  source <(%s bash)                       # bash, this shell\n"+
			"  %s zsh > \"${fpath[1]}/_%s\"          # zsh\n"+
			"  %s fish > ~/.config/fish/completions/%s.fish\n", cmd, root.Name, cmd, cmd, root.Name, cmd, root.Name)
		return ExitOK
	}
	if len(args) != 1 {
		return UsageError(stderr, cmd, fmt.Errorf("want one shell (bash, zsh or fish), got %d argument(s)", len(args)))
	}
	if err := Completion(stdout, args[0], root); err != nil {
		return UsageError(stderr, cmd, err)
	}
	return ExitOK
}

// Completion writes the completion script of root for shell.
func Completion(w io.Writer, shell string, root Command) error {
	root = withCompletion(root)
	switch shell {
	case "bash":
		bash(w, root)
	case "zsh":
		zsh(w, root)
	case "fish":
		fish(w, root)
	default:
		return fmt.Errorf("unknown shell %q: want bash, zsh or fish", shell)
	}
	return nil
}

// withCompletion adds the completion subcommand itself to a binary that has
// subcommands (one without takes "completion" as its only argument).
func withCompletion(root Command) Command {
	if len(root.Commands) > 0 {
		root.Commands = append(append([]Command(nil), root.Commands...), Command{Name: "completion", Summary: "print a shell completion script (bash, zsh or fish)"})
	}
	return root
}

type flagInfo struct {
	name, usage string
	takesValue  bool
}

func flags(fs *flag.FlagSet) []flagInfo {
	var out []flagInfo
	if fs == nil {
		return []flagInfo{{name: "help", usage: "show the help"}}
	}
	fs.VisitAll(func(f *flag.Flag) {
		b, isBool := f.Value.(interface{ IsBoolFlag() bool })
		out = append(out, flagInfo{name: f.Name, usage: f.Usage, takesValue: !(isBool && b.IsBoolFlag())})
	})
	out = append(out, flagInfo{name: "help", usage: "show the help"})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// FlagNames are the names of the flags of fs, sorted, without "help".
func FlagNames(fs *flag.FlagSet) []string {
	var names []string
	if fs != nil {
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	}
	sort.Strings(names)
	return names
}

func flagWords(fs *flag.FlagSet) string {
	var ws []string
	for _, f := range flags(fs) {
		ws = append(ws, "--"+f.name)
	}
	return strings.Join(ws, " ")
}

func ident(name string) string { return strings.NewReplacer("-", "_", ".", "_").Replace(name) }

// summary is the first sentence of a usage text, without its "(env …)".
func summary(s string) string {
	if i := strings.Index(s, " (env "); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, "; "); i > 0 {
		s = s[:i]
	}
	if len(s) > 70 {
		i := strings.LastIndex(s[:70], " ")
		s = s[:max(i, 40)] + "…"
	}
	return s
}

func bash(w io.Writer, root Command) {
	fn := "_bulkreg_" + ident(root.Name)
	fmt.Fprintf(w, "# bash completion for %s; load it with: source <(%s completion bash)\n", root.Name, root.Name)
	fmt.Fprintf(w, "%s() {\n\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" sub=\"\" i words=\"\" files=\"\"\n", fn)
	if len(root.Commands) == 0 {
		fmt.Fprintf(w, "\twords=%q\n", flagWords(root.Flags)+" completion")
		fmt.Fprintf(w, "\tif [[ \"$COMP_CWORD\" -ge 2 && \"${COMP_WORDS[1]}\" == completion ]]; then\n\t\tCOMPREPLY=($(compgen -W \"bash zsh fish\" -- \"$cur\"))\n\t\treturn\n\tfi\n")
	} else {
		fmt.Fprint(w, "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n\t\tcase \"${COMP_WORDS[i]}\" in\n\t\t-*) ;;\n\t\t*) sub=\"${COMP_WORDS[i]}\"; break ;;\n\t\tesac\n\tdone\n")
		fmt.Fprint(w, "\tcase \"$sub\" in\n")
		var names []string
		for _, c := range root.Commands {
			names = append(names, c.Name)
		}
		fmt.Fprintf(w, "\t\"\") words=%q ;;\n", strings.Join(names, " ")+" --help --version")
		for _, c := range root.Commands {
			if c.Name == "completion" {
				fmt.Fprint(w, "\tcompletion) words=\"bash zsh fish\" ;;\n")
				continue
			}
			files := ""
			if c.Files {
				files = " files=1"
			}
			fmt.Fprintf(w, "\t%s) words=%q%s ;;\n", c.Name, flagWords(c.Flags), files)
		}
		fmt.Fprint(w, "\tesac\n")
	}
	if root.Files {
		fmt.Fprint(w, "\tfiles=1\n")
	}
	fmt.Fprint(w, "\tif [[ -n \"$files\" && \"$cur\" != -* ]]; then\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\telse\n\t\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n\tfi\n}\n")
	fmt.Fprintf(w, "complete -o default -F %s %s\n", fn, root.Name)
}

// zshSingle quotes s for zsh; zshDesc escapes what _arguments reads in a
// flag's description ([ ] :).
func zshSingle(s string) string { return "'" + strings.ReplaceAll(s, "'", "'\\''") + "'" }

func zshDesc(s string) string {
	return strings.NewReplacer("[", "\\[", "]", "\\]", ":", "\\:").Replace(s)
}

func zshArgs(w io.Writer, indent string, c Command) {
	for _, f := range flags(c.Flags) {
		spec := "--" + f.name + "[" + zshDesc(summary(f.usage)) + "]"
		if f.takesValue {
			spec = "--" + f.name + "=[" + zshDesc(summary(f.usage)) + "]:value:"
		}
		fmt.Fprintf(w, "%s%s \\\n", indent, zshSingle(spec))
	}
	if c.Files {
		fmt.Fprintf(w, "%s'*:file:_files'\n", indent)
	} else {
		fmt.Fprintf(w, "%s'*: :'\n", indent)
	}
}

func zsh(w io.Writer, root Command) {
	fn := "_" + ident(root.Name)
	fmt.Fprintf(w, "#compdef %s\n# zsh completion for %s: %s completion zsh > \"${fpath[1]}/_%s\"\n", root.Name, root.Name, root.Name, root.Name)
	fmt.Fprintf(w, "%s() {\n", fn)
	if len(root.Commands) == 0 {
		fmt.Fprint(w, "\tif [[ ${words[2]} == completion ]]; then\n\t\t_values shell bash zsh fish\n\t\treturn\n\tfi\n")
		fmt.Fprint(w, "\t_arguments -s \\\n")
		zshArgs(w, "\t\t", root)
		fmt.Fprint(w, "}\n")
		fmt.Fprintf(w, "compdef %s %s\n", fn, root.Name)
		return
	}
	fmt.Fprint(w, "\tlocal -a subcommands\n\tsubcommands=(\n")
	for _, c := range root.Commands {
		fmt.Fprintf(w, "\t\t%s\n", zshSingle(c.Name+":"+c.Summary))
	}
	fmt.Fprint(w, "\t)\n\tif (( CURRENT == 2 )); then\n\t\t_describe command subcommands\n\t\treturn\n\tfi\n")
	fmt.Fprint(w, "\tlocal sub=${words[2]}\n\tshift 1 words\n\t(( CURRENT-- ))\n\tcase $sub in\n")
	for _, c := range root.Commands {
		if c.Name == "completion" {
			fmt.Fprint(w, "\tcompletion) _values shell bash zsh fish ;;\n")
			continue
		}
		fmt.Fprintf(w, "\t%s)\n\t\t_arguments -s \\\n", c.Name)
		zshArgs(w, "\t\t\t", c)
		fmt.Fprint(w, "\t\t;;\n")
	}
	fmt.Fprint(w, "\tesac\n}\n")
	fmt.Fprintf(w, "compdef %s %s\n", fn, root.Name)
}

func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

func fishFlags(w io.Writer, bin, cond string, c Command) {
	for _, f := range flags(c.Flags) {
		req := ""
		if f.takesValue {
			req = " -r"
		}
		fmt.Fprintf(w, "complete -c %s%s -l %s%s -d %s\n", bin, cond, f.name, req, fishQuote(summary(f.usage)))
	}
}

func fish(w io.Writer, root Command) {
	bin := root.Name
	fmt.Fprintf(w, "# fish completion for %s: %s completion fish > ~/.config/fish/completions/%s.fish\n", bin, bin, bin)
	fmt.Fprintf(w, "complete -c %s -e\n", bin)
	if len(root.Commands) == 0 {
		files := " -f"
		if root.Files {
			files = ""
		}
		fmt.Fprintf(w, "complete -c %s%s\n", bin, files)
		fishFlags(w, bin, "", root)
		fmt.Fprintf(w, "complete -c %s -n '__fish_use_subcommand' -a completion -d 'print a shell completion script'\n", bin)
		fmt.Fprintf(w, "complete -c %s -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n", bin)
		return
	}
	fmt.Fprintf(w, "complete -c %s -f\n", bin)
	for _, c := range root.Commands {
		fmt.Fprintf(w, "complete -c %s -n '__fish_use_subcommand' -a %s -d %s\n", bin, c.Name, fishQuote(summary(c.Summary)))
	}
	for _, c := range root.Commands {
		cond := fmt.Sprintf(" -n '__fish_seen_subcommand_from %s'", c.Name)
		if c.Name == "completion" {
			fmt.Fprintf(w, "complete -c %s%s -a 'bash zsh fish'\n", bin, cond)
			continue
		}
		if c.Files {
			fmt.Fprintf(w, "complete -c %s%s -F\n", bin, cond)
		}
		fishFlags(w, bin, cond, c)
	}
}

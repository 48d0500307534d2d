package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The docs check: README.md and docs/*.md say only what the command tree
// has. Its rules, for whoever writes a doc:
//
//   - A fenced shell block (```sh, ```bash, ```shell) is run by a test or
//     marked as an example (```sh example). The README's plain ```sh blocks
//     are run in order by test/e2e's TestTheREADMEBlocksRunInOrder,
//     docs/FLEET.md's by TestTheFleetWalkthroughRunsAsWritten, and
//     docs/CLI.md's `claude mcp add` block by
//     TestClaudeCodeMCPConfigWorksAsTheDocWritesIt; every other shell block
//     is an example.
//   - Every `simlock <command> …` a doc writes (in a code span, a shell
//     block or a ```text block) names a command that exists, and every
//     --flag on that line is a flag of that command (or a global one).
//   - A flag table in a command's section of docs/CLI.md lists only flags
//     of that command or of a command under it.
//   - A "not yet" list (a paragraph or list under a line saying something
//     is not yet built, or not in this build) names no command that exists.

// docFiles are the docs the check reads, relative to the module root.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	root := filepath.Join("..", "..")
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, filepath.Join(root, "README.md"))
	docs := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, n)
		docs[rel] = string(b)
	}
	if len(docs) < 2 {
		t.Fatalf("found %d docs", len(docs))
	}
	return docs
}

// fence is one fenced block of a doc.
type fence struct {
	info string // the info string: "sh", "sh example", "json", …
	body string
	line int // of the opening fence, 1-based
}

var fenceRE = regexp.MustCompile("(?ms)^```([^\n`]*)\n(.*?)^```[ \t]*$")

func fences(doc string) []fence {
	var out []fence
	for _, m := range fenceRE.FindAllStringSubmatchIndex(doc, -1) {
		out = append(out, fence{info: strings.TrimSpace(doc[m[2]:m[3]]), body: doc[m[4]:m[5]],
			line: strings.Count(doc[:m[0]], "\n") + 1})
	}
	return out
}

// outsideFences is the doc with every fenced block blanked (lines kept, so
// line numbers still hold).
func outsideFences(doc string) string {
	return fenceRE.ReplaceAllStringFunc(doc, func(b string) string {
		return strings.Repeat("\n", strings.Count(b, "\n"))
	})
}

func isShell(info string) bool {
	lang, _, _ := strings.Cut(info, " ")
	return lang == "sh" || lang == "bash" || lang == "shell"
}

// runByTest reports whether a test runs this shell block (see the rules).
func runByTest(file string, f fence) bool {
	if f.info != "sh" {
		return false
	}
	switch file {
	case "README.md":
		return true
	case filepath.Join("docs", "FLEET.md"):
		return true
	case filepath.Join("docs", "CLI.md"):
		return strings.HasPrefix(f.body, "claude mcp add ")
	}
	return false
}

func TestDocShellBlocksAreRunOrMarkedAsExamples(t *testing.T) {
	for file, doc := range docFiles(t) {
		for _, f := range fences(doc) {
			if !isShell(f.info) || runByTest(file, f) || strings.Contains(" "+f.info+" ", " example ") {
				continue
			}
			t.Errorf("%s:%d: a ```%s block no test runs; mark it ```%s example, or run it from a test", file, f.line, f.info, f.info)
		}
	}
}

// docCommand is one `simlock …` command line a doc writes.
type docCommand struct {
	where string
	words []string // after "simlock", up to the end of the command
}

var (
	spanRE  = regexp.MustCompile("`([^`\n]+)`")
	flagRE  = regexp.MustCompile(`(?:^|[\[|(])(--[a-z][a-z0-9-]*)`)
	startRE = regexp.MustCompile(`^(?:\$\(|"\$\(|\./cmd/)?simlock$`)
	wordRE  = regexp.MustCompile(`^[a-z]`)
	envRE   = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=[^"':]*$`)
)

// commandStart reports whether fields[i] starts a simlock command: the
// word "simlock" (or "$(simlock", "./cmd/simlock") where a command can
// start, at the start of the text, after a shell separator or an
// assignment, not a "simlock" in a sentence or a JSON string.
func commandStart(fields []string, i int) bool {
	if !startRE.MatchString(fields[i]) {
		return false
	}
	if i == 0 || strings.Contains(fields[i], "$(") {
		return true
	}
	switch p := fields[i-1]; p {
	case "|", "||", "&&", ";", "do", "then", "else", "time", "exec", "eval", "sudo", "run", "!", "$":
		return true
	default:
		return envRE.MatchString(p)
	}
}

// commandsIn finds every simlock command in text: the words after a
// "simlock" word up to the end of the shell command it is part of.
func commandsIn(where, text string) []docCommand {
	var out []docCommand
	fields := strings.Fields(text)
	for i := range fields {
		if !commandStart(fields, i) {
			continue
		}
		var words []string
		for _, x := range fields[i+1:] {
			if x == "|" || x == "||" || x == "&&" || x == ";" || strings.HasPrefix(x, "#") || strings.HasPrefix(x, ">") || strings.HasPrefix(x, "2>") {
				break
			}
			end := strings.HasSuffix(x, ")") || strings.HasSuffix(x, ";") || strings.HasSuffix(x, `"`)
			words = append(words, strings.TrimRight(x, `);"`))
			if end {
				break
			}
		}
		out = append(out, docCommand{where: where, words: words})
	}
	return out
}

// docCommands are the simlock commands of every doc: in code spans outside
// fences, and on the lines of shell and text blocks.
func docCommands(t *testing.T) []docCommand {
	var out []docCommand
	for file, doc := range docFiles(t) {
		for i, line := range strings.Split(outsideFences(doc), "\n") {
			for _, m := range spanRE.FindAllStringSubmatch(line, -1) {
				out = append(out, commandsIn(fmt.Sprintf("%s:%d", file, i+1), m[1])...)
			}
		}
		for _, f := range fences(doc) {
			lang, _, _ := strings.Cut(f.info, " ")
			if !isShell(f.info) && lang != "text" {
				continue
			}
			for i, line := range strings.Split(f.body, "\n") {
				out = append(out, commandsIn(fmt.Sprintf("%s:%d", file, f.line+1+i), line)...)
			}
		}
	}
	return out
}

// resolve walks words down the command tree as far as they name commands.
func resolve(root *cobra.Command, words []string) (*cobra.Command, []string) {
	cmd := root
	for len(words) > 0 {
		var next *cobra.Command
		for _, c := range cmd.Commands() {
			if c.Name() == words[0] || c.HasAlias(words[0]) {
				next = c
			}
		}
		if next == nil {
			break
		}
		cmd, words = next, words[1:]
	}
	return cmd, words
}

func TestDocCommandsAndFlagsExist(t *testing.T) {
	root := docRoot()
	checked := 0
	for _, dc := range docCommands(t) {
		if len(dc.words) == 0 || !wordRE.MatchString(dc.words[0]) {
			continue // simlock alone, a placeholder (<cmd>) or a flag of the root
		}
		// `simlock simctl|adb …` names two commands.
		for _, first := range strings.Split(strings.ReplaceAll(dc.words[0], `\|`, "|"), "|") {
			checked++
			checkDocCommand(t, root, dc, append([]string{first}, dc.words[1:]...))
		}
	}
	if checked < 50 {
		t.Errorf("checked %d simlock commands in the docs; the scan is broken", checked)
	}
}

// checkDocCommand checks that words name a command and flags of it.
func checkDocCommand(t *testing.T, root *cobra.Command, dc docCommand, words []string) {
	t.Helper()
	cmd, rest := resolve(root, words)
	if cmd == root {
		t.Errorf("%s: `simlock %s`: there is no command %q", dc.where, strings.Join(dc.words, " "), words[0])
		return
	}
	if cmd.DisableFlagParsing {
		return // the rest is the wrapped tool's (simctl, adb)
	}
	for _, w := range rest {
		if w == "--" {
			break
		}
		for _, m := range flagRE.FindAllStringSubmatch(w, -1) {
			name := strings.TrimPrefix(m[1], "--")
			if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil && name != "help" {
				t.Errorf("%s: `simlock %s`: %s has no flag --%s", dc.where, strings.Join(dc.words, " "), cmd.CommandPath(), name)
			}
		}
	}
}

// docRoot is the command tree as a user's simlock has it, with the help
// and completion commands cobra adds when it runs.
func docRoot() *cobra.Command {
	root := newRoot(Env{Getenv: func(string) string { return "" }})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	return root
}

// notYetRE finds a line that opens a "not yet" list.
var notYetRE = regexp.MustCompile(`(?i)not (?:yet )?(?:built|in this build|implemented)|not yet:|not yet in`)

func TestDocNotYetListsNameNoCommandThatExists(t *testing.T) {
	root := docRoot()
	for file, doc := range docFiles(t) {
		lines := strings.Split(outsideFences(doc), "\n")
		for i := 0; i < len(lines); i++ {
			if !notYetRE.MatchString(lines[i]) {
				continue
			}
			// The list: this line and what follows to the first blank line
			// after a list item or a paragraph.
			for j := i; j < len(lines) && (j == i || strings.TrimSpace(lines[j]) != ""); j++ {
				for _, m := range spanRE.FindAllStringSubmatch(lines[j], -1) {
					words := strings.Fields(strings.TrimPrefix(m[1], "simlock "))
					if len(words) == 0 {
						continue
					}
					if cmd, rest := resolve(root, words); cmd != root && len(rest) == 0 {
						t.Errorf("%s:%d: `%s` is listed as not built, but %q exists", file, j+1, m[1], cmd.CommandPath())
					}
				}
			}
		}
	}
}

// A flag table in a command's section of docs/CLI.md (a row starting with
// `--flag`) lists flags of that command, or of a command under it.
func TestDocFlagTablesListFlagsThatExist(t *testing.T) {
	root := docRoot()
	doc := docFiles(t)[filepath.Join("docs", "CLI.md")]
	headingRE := regexp.MustCompile(`^##+ simlock (.+)$`)
	rowRE := regexp.MustCompile("^\\| `(--[a-z][a-z0-9-]*)")
	var section []*cobra.Command
	rows := 0
	for i, line := range strings.Split(outsideFences(doc), "\n") {
		if strings.HasPrefix(line, "## ") {
			section = nil
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			section = nil
			for _, name := range strings.Split(m[1], ", ") {
				if cmd, rest := resolve(root, strings.Fields(name)); cmd != root && len(rest) == 0 {
					section = append(section, cmd)
				}
			}
			continue
		}
		m := rowRE.FindStringSubmatch(line)
		if m == nil || section == nil {
			continue
		}
		rows++
		name := strings.TrimPrefix(m[1], "--")
		if !slices.ContainsFunc(section, func(c *cobra.Command) bool { return hasFlagBelow(c, name) }) {
			t.Errorf("docs/CLI.md:%d: --%s is in the flag table of %s, which has no such flag", i+1, name, section[0].CommandPath())
		}
	}
	if rows < 30 {
		t.Errorf("checked %d flag rows in docs/CLI.md; the scan is broken", rows)
	}
}

// hasFlagBelow reports whether c or a command under it has the flag.
func hasFlagBelow(c *cobra.Command, name string) bool {
	if c.Flags().Lookup(name) != nil || c.InheritedFlags().Lookup(name) != nil {
		return true
	}
	for _, sub := range c.Commands() {
		if hasFlagBelow(sub, name) {
			return true
		}
	}
	return false
}

package cli

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// The exit-code table of docs/CLI.md lists, for each exit status, exactly
// the error codes the one error table (contract) maps to it: a code added,
// moved or dropped there fails here until the docs say so.
func TestTheDocumentedExitCodesAreTheErrorTables(t *testing.T) {
	b, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Exit codes")
	if start < 0 {
		t.Fatal("docs/CLI.md has no \"## Exit codes\" section")
	}
	row := regexp.MustCompile("(?m)^\\| (\\d+) \\| ([^|]*) \\|")
	code := regexp.MustCompile("`([A-Z_]+)`")
	documented := map[contract.Code]int{}
	for _, m := range row.FindAllStringSubmatch(doc[start:], -1) {
		exit, _ := strconv.Atoi(m[1])
		for _, c := range code.FindAllStringSubmatch(m[2], -1) {
			if prev, ok := documented[contract.Code(c[1])]; ok {
				t.Errorf("%s is documented under exit %d and %d", c[1], prev, exit)
			}
			documented[contract.Code(c[1])] = exit
		}
	}
	codes := contract.Codes()
	slices.Sort(codes)
	for _, c := range codes {
		exit, ok := documented[c]
		switch {
		case !ok:
			t.Errorf("%s (exit %d) is missing from the exit-code table", c, c.ExitCode())
		case exit != c.ExitCode():
			t.Errorf("%s is documented as exit %d, but exits %d", c, exit, c.ExitCode())
		}
		delete(documented, c)
	}
	for c := range documented {
		t.Errorf("the exit-code table names %s, which is no error code", c)
	}
}

// Every section of docs/CLI.md is linked from its contents list, by the
// anchor a Markdown renderer gives its heading.
func TestTheCLIDocsContentsListEverySection(t *testing.T) {
	b, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start, end := strings.Index(doc, "Contents:\n"), strings.Index(doc, "\n---\n")
	if start < 0 || end < start {
		t.Fatal("docs/CLI.md has no contents list before its first rule")
	}
	contents := doc[start:end]
	anchor := strings.NewReplacer(" ", "-", ":", "", "`", "", ".", "", "(", "", ")", "", ",", "")
	for _, m := range regexp.MustCompile("(?m)^## (.+)$").FindAllStringSubmatch(doc, -1) {
		a := "(#" + anchor.Replace(strings.ToLower(m[1])) + ")"
		if !strings.Contains(contents, a) {
			t.Errorf("the contents list has no link %s to the section %q", a, m[1])
		}
	}
}

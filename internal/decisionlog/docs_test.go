package decisionlog

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/bintest"
)

// docs/OPERATIONS.md's table of logged decisions is the table the code
// logs by: the same events, in the same order, each with its level and
// message, and every field the entry copies named in its row.
func TestTheDocumentedDecisionsAreTheTable(t *testing.T) {
	root, err := bintest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "OPERATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### The decisions logged")
	if !ok {
		t.Fatal("docs/OPERATIONS.md has no section The decisions logged")
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z][a-z-]*\\.[a-z.-]+)` \\| ([a-z]+) \\| ([^|]+) \\| ([^|]*) \\|$")
	rows := row.FindAllStringSubmatch(section, -1)
	if len(rows) != len(Entries) {
		t.Errorf("the doc's table has %d rows, the code's %d", len(rows), len(Entries))
	}
	for i, e := range Entries {
		if i >= len(rows) {
			t.Errorf("%s is not in the doc's table", e.Event)
			continue
		}
		r := rows[i]
		if r[1] != e.Event || r[2] != strings.ToLower(e.Level.String()) || strings.TrimSpace(r[3]) != e.Message {
			t.Errorf("row %d of the doc is %s %s %q; the code logs %s at %s as %q", i+1, r[1], r[2], strings.TrimSpace(r[3]), e.Event, strings.ToLower(e.Level.String()), e.Message)
		}
		for _, f := range e.Fields {
			name := f.As
			if name == "" {
				name = f.From
			}
			if !strings.Contains(r[4], "`"+name+"`") {
				t.Errorf("the doc's row for %s does not name its attribute %s", e.Event, name)
			}
		}
	}
}

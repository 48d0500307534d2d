package events

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/bintest"
)

// eventName finds the events the code records: tx.Event("…", …),
// emit("…", …), Emit("…", …) and Event: "…" literals.
var eventName = regexp.MustCompile(`(?:\b(?:Event|emit|Emit)\(|\bEvent: *)"([a-z][a-z-]*\.[a-z.-]+)"`)

// Every event the code records is in docs/EVENTS.md, so a reader of the
// event log can look any line up.
func TestEveryEventTheCodeRecordsIsDocumented(t *testing.T) {
	root, err := bintest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "EVENTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	err = filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range eventName.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 30 {
		t.Fatalf("found only %d event names in the code; the pattern no longer matches how events are recorded", len(names))
	}
	for name, where := range names {
		if !strings.Contains(string(doc), "`"+name+"`") {
			rel, _ := filepath.Rel(root, where)
			t.Errorf("%s (recorded in %s) is not in docs/EVENTS.md", name, rel)
		}
	}
}

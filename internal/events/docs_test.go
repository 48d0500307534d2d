package events

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/bintest"
	"github.com/simlock/simlock/internal/contract"
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
	if len(names) < 5 {
		t.Fatalf("found only %d event names in the code; the pattern no longer matches how events are recorded", len(names))
	}
	// The code names events by contract's constants: each of them counts as
	// recorded, in contract/eventnames.go.
	for _, name := range contract.EventNames() {
		if _, ok := names[name]; !ok {
			names[name] = filepath.Join(root, "internal", "contract", "eventnames.go")
		}
	}
	for name, where := range names {
		if !strings.Contains(string(doc), "`"+name+"`") {
			rel, _ := filepath.Rel(root, where)
			t.Errorf("%s (recorded in %s) is not in docs/EVENTS.md", name, rel)
		}
	}
}

// Every event docs/EVENTS.md lists has its constant in contract, so the
// list code names events by is whole.
func TestEveryDocumentedEventHasItsConstant(t *testing.T) {
	root, err := bintest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "EVENTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, name := range contract.EventNames() {
		if known[name] {
			t.Errorf("contract.EventNames lists %s twice", name)
		}
		known[name] = true
	}
	row := regexp.MustCompile("(?m)^\\| ([^|]*)\\|")
	named := regexp.MustCompile("`([a-z][a-z-]*\\.[a-z.-]+)`")
	var documented int
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		for _, n := range named.FindAllStringSubmatch(m[1], -1) {
			documented++
			if !known[n[1]] {
				t.Errorf("docs/EVENTS.md lists %s; contract has no constant for it (eventnames.go)", n[1])
			}
		}
	}
	if documented < 50 {
		t.Fatalf("found only %d events in docs/EVENTS.md's tables; the parse no longer matches them", documented)
	}
}

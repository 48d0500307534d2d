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

// eventLiteral finds an event recorded by a literal name rather than by
// contract's constant: tx.Event("…", …), emit("…", …), Emit("…", …) and
// Event: "…".
var eventLiteral = regexp.MustCompile(`(?:\b(?:Event|emit|Emit)\(|\bEvent: *)"([a-z][a-z-]*\.[a-z.-]+)"`)

// eventConst finds an event recorded by contract's constant.
var eventConst = regexp.MustCompile(`\bcontract\.(Ev[A-Z]\w*)\b`)

// The code names every event it records by contract's constant, and every
// constant is in docs/EVENTS.md, so a reader of the event log can look any
// line up.
func TestEveryEventTheCodeRecordsIsDocumented(t *testing.T) {
	root, doc := eventsDoc(t)
	used := 0
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range eventLiteral.FindAllStringSubmatch(string(b), -1) {
			t.Errorf("%s records %s by a literal name; name it by its constant in contract/eventnames.go", rel, m[1])
		}
		used += len(eventConst.FindAllString(string(b), -1))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if used < 50 {
		t.Fatalf("found only %d uses of contract's event constants in the code; the pattern no longer matches how events are recorded", used)
	}
	for _, name := range contract.EventNames() {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s (contract/eventnames.go) is not in docs/EVENTS.md", name)
		}
	}
}

// Every event docs/EVENTS.md lists has its constant in contract, so the
// list code names events by is whole.
func TestEveryDocumentedEventHasItsConstant(t *testing.T) {
	_, doc := eventsDoc(t)
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

// docs/EVENTS.md's table of lease.rejected reasons and contract's
// constants are the same list, in the same order: a reason the code can
// record is documented, and a documented one is spelt by its constant.
func TestTheRejectReasonsAreTheDocumentedOnes(t *testing.T) {
	_, doc := eventsDoc(t)
	_, table, ok := strings.Cut(string(doc), "`lease.rejected` reasons:")
	if !ok {
		t.Fatal("docs/EVENTS.md has no \"`lease.rejected` reasons:\" table")
	}
	table, _, _ = strings.Cut(table, "\n\n#")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|").FindAllStringSubmatch(table, -1) {
		if m[1] != "reason" { // the header row
			documented = append(documented, m[1])
		}
	}
	var constants []string
	for _, r := range contract.RejectReasons() {
		constants = append(constants, string(r))
	}
	if strings.Join(documented, " ") != strings.Join(constants, " ") {
		t.Errorf("docs/EVENTS.md's lease.rejected reasons are\n  %v\ncontract.RejectReasons() are\n  %v", documented, constants)
	}
}

// eventsDoc is the module's root and docs/EVENTS.md's text.
func eventsDoc(t *testing.T) (root string, doc []byte) {
	t.Helper()
	root, err := bintest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err = os.ReadFile(filepath.Join(root, "docs", "EVENTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	return root, doc
}

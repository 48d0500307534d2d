package termtest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// UpdateEnv names the environment variable that rewrites golden files
// instead of comparing with them: SIMLOCK_UPDATE_GOLDEN=1 go test ./...
const UpdateEnv = "SIMLOCK_UPDATE_GOLDEN"

// Golden compares got, a view as a person sees it, with the file
// testdata/<name>.golden of the test's package, and fails the test naming
// both when they differ. With UpdateEnv set to 1 it writes got there first.
func Golden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if os.Getenv(UpdateEnv) == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with %s=1 to create it)", err, UpdateEnv)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

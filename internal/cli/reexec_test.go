package cli

import (
	"slices"
	"testing"
)

// A re-executed daemon run keeps every argument but the on-demand start's
// --notify-fd, in either spelling.
func TestReexecArgsDropTheNotifyFD(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"simlock", "daemon", "run", "--gateway", "--http"}, []string{"simlock", "daemon", "run", "--gateway", "--http"}},
		{[]string{"simlock", "daemon", "run", "--notify-fd", "3", "--http"}, []string{"simlock", "daemon", "run", "--http"}},
		{[]string{"simlock", "daemon", "run", "--notify-fd=3"}, []string{"simlock", "daemon", "run"}},
		{[]string{"simlock", "daemon", "run", "-notify-fd=3", "--gateway"}, []string{"simlock", "daemon", "run", "--gateway"}},
		{[]string{"simlock", "daemon", "run", "--", "--notify-fd=3"}, []string{"simlock", "daemon", "run", "--", "--notify-fd=3"}},
	} {
		if got := reexecArgs(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("reexecArgs(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

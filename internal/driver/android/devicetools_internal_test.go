package android

import (
	"os/exec"
	"testing"
)

// shellQuote's word reads back as itself in a POSIX shell, whatever it
// holds.
func TestShellQuoteIsOneWordOfItself(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, s := range []string{
		"com.example.app", "myapp://x?a=1&b=2", "';reboot;'", `$(id)`, "`id`", "a b", `"q"`, `\`, "*", "", "-n", "x'y'z", "a\nb",
	} {
		q := shellQuote(s)
		out, err := exec.Command(sh, "-c", "printf %s "+q).Output()
		if err != nil || string(out) != s {
			t.Errorf("shellQuote(%q) = %s reads back as %q, %v", s, q, out, err)
		}
	}
	if got := shellQuote("com.example.app"); got != "com.example.app" {
		t.Errorf("a plain word is quoted: %s", got)
	}
}

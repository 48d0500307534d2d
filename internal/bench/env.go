package bench

import (
	"io"

	"github.com/simlock/simlock/internal/core"
)

// Env is what a run needs of the command that asked for it.
type Env struct {
	// Executable is the simlock binary whose `daemon run` is measured.
	Executable string
	// Version is the version the result names.
	Version string
	// Stderr takes what a person is told beside the result (--keep's path).
	Stderr io.Writer
	// StartupReason reads what a daemon that died at startup printed
	// (its daemon.out) as why, the way the CLI's own start says it.
	StartupReason func(out string) string
	// Host is the machine as the in-process daemon of the push row sees it.
	Host core.Host
}

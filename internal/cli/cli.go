// Package cli is the simlock command line: cobra commands that translate
// flags into contract operations through the typed client, and render what
// comes back. Results go to stdout as JSON; progress and errors go to stderr,
// as JSON lines when stderr is not a terminal. Each failure maps its contract
// code to one exit code.
//
// Nothing here decides anything about leases: the daemon does.
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/contract"
)

// Env is what the CLI takes from its process; tests give their own.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// StdoutIsTerminal decides whether results are tables for a person
	// or JSON; StderrIsTerminal decides the same for progress and errors.
	StdoutIsTerminal, StderrIsTerminal bool
	// TermWidth is the columns of the terminal stderr is, 0 when unknown
	// (nil: unknown); the live progress line is cut to it.
	TermWidth func() int
	// StdinIsTerminal says a person can answer a confirmation.
	StdinIsTerminal bool
	// Executable is the simlock binary, started as the daemon on demand.
	Executable string
	Version    string
	PPID       int
}

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
	// quiet means the command already printed what went wrong.
	quiet bool
}

func (e *exitError) Error() string { return e.err.Error() }

// Run executes the CLI and returns the process exit code.
func Run(ctx context.Context, args []string, env Env) int {
	root := newRoot(env)
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	err = inCommandFlags(cmd, err)
	// cobra leaves the flag unparsed when it fails first (an unknown
	// command), so the arguments are read too.
	asJSON, _ := root.PersistentFlags().GetBool("json")
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[:i]
	}
	asJSON = asJSON || slices.Contains(args, "--json") || slices.Contains(args, "--json=true")
	human := env.StderrIsTerminal && !asJSON
	var ee *exitError
	if errors.As(err, &ee) {
		if !ee.quiet {
			printError(env.Stderr, ee.err, human)
		}
		return ee.code
	}
	// cobra's own errors: unknown command, bad flag, missing argument.
	line := cobraLine(err.Error())
	if strings.HasSuffix(line, "?") {
		line += " See simlock --help"
	} else {
		line += "; see simlock --help"
	}
	printError(env.Stderr, contract.Errorf(contract.CodeUsage, "%s", line), human)
	return contract.CodeUsage.ExitCode()
}

// cobraLine makes one line of a cobra error, whose suggestions come on lines
// of their own: `unknown command "statsu" for "simlock"; did you mean status?`.
func cobraLine(msg string) string {
	const suggest = "\n\nDid you mean this?\n"
	if head, tail, ok := strings.Cut(msg, suggest); ok {
		msg = head + "; did you mean " + strings.Join(strings.Fields(tail), " or ") + "?"
	}
	return strings.TrimSuffix(strings.Join(strings.Fields(msg), " "), ".")
}

// jsonOut reports whether stdout gets JSON rather than a human view: it is
// not a terminal, or --json was given.
func jsonOut(cmd *cobra.Command, env Env) bool {
	asJSON, _ := cmd.Flags().GetBool("json")
	return asJSON || !env.StdoutIsTerminal
}

// fail turns an error into the command's exit.
func fail(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee
	}
	ce := contract.AsError(err)
	return &exitError{code: ce.Code.ExitCode(), err: ce}
}

func usage(format string, args ...any) error {
	return &exitError{code: 2, err: contract.Errorf(contract.CodeUsage, format, args...)}
}

// printJSON writes one JSON line to stdout.
func printJSON(w io.Writer, v any) error {
	// Not HTML-escaped: these lines are read by people and programs, never
	// embedded in a page, and "<id>" must not print as "\u003cid\u003e".
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// home is SIMLOCK_HOME, defaulting to ~/.simlock.
func (env Env) home() (string, error) {
	h := env.Getenv("SIMLOCK_HOME")
	if h == "" {
		dir, err := os.UserHomeDir()
		if err != nil {
			return "", usage("SIMLOCK_HOME is unset and the home directory is unknown: %v", err)
		}
		h = filepath.Join(dir, ".simlock")
	}
	abs, err := filepath.Abs(h)
	if err != nil {
		return "", usage("SIMLOCK_HOME %q: %v", h, err)
	}
	// A unix socket path has a small fixed limit (104 bytes on macOS).
	if n := len(filepath.Join(abs, "daemon.sock")); n > 103 {
		return "", usage("SIMLOCK_HOME is too long for a socket path (%d bytes; at most 103 with /daemon.sock)", n)
	}
	return abs, nil
}

func newRoot(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "simlock",
		Short: "Lease iOS simulators and Android emulators to coding agents",
		Long: `simlock hands out booted, health-checked iOS simulators and Android emulators
as leases. An agent asks for a device, waits in a fair queue if none is free,
sees each step of the wait, and gets a device nobody else touches until it
releases it or its TTL runs out.

On a terminal, results are tables, progress is one live line that leaves a
line per finished step, and a failure is one sentence with the next step.
Elsewhere (a pipe, a file, an agent's shell) or with --json, results are JSON
on stdout and progress and errors are JSON lines on stderr.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       env.Version,
	}
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return refuseLocalOnly(cmd, env) }
	root.PersistentFlags().Bool("json", false, "print results, progress and errors as JSON, even on a terminal")
	root.PersistentFlags().String("token", "", "admin credential (default: SIMLOCK_ADMIN_TOKEN, then $SIMLOCK_HOME/admin.token)")
	root.AddCommand(
		leaseCmd(env), releaseCmd(env), statusCmd(env), listCmd(env), catalogCmd(env),
		eventsCmd(env), daemonCmd(env), benchCmd(env), configCmd(env), tokenCmd(env), workerCmd(env), componentCmd(env), demoCmd(env), cleanupCmd(env), nukeCmd(env), mcpCmd(env), retryCmd(env),
		jobCmd(env), statsCmd(env), serviceCmd(env), metricsCmd(env),
		passthroughCmd(env, "simctl", "iOS"), passthroughCmd(env, "adb", "Android"), doctorCmd(env),
		pushCmd(env), pullCmd(env), installCmd(env), screenshotCmd(env),
		loginCmd(env), logoutCmd(env),
		launchCmd(env), terminateCmd(env), openURLCmd(env), logsCmd(env), locationCmd(env), appearanceCmd(env),
	)
	refuseUnknownSubcommands(root)
	return root
}

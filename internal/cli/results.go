package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
)

// printResult prints a command's result: its human view for a person at a
// terminal, else (a pipe, a file, or --json) v as one JSON line. Every
// command prints its result through here, so none prints JSON on a
// terminal by accident.
func printResult(cmd *cobra.Command, env Env, v any, human func(w io.Writer)) error {
	if jsonOut(cmd, env) || human == nil {
		return printJSON(env.Stdout, v)
	}
	human(env.Stdout)
	return nil
}

// listWords writes up to a few ids after a count: "2 leases (lse_a,
// lse_b)"; none is "no leases".
func listWords(ids []string, one, many string) string {
	switch len(ids) {
	case 0:
		return "no " + many
	case 1:
		return "1 " + one + " (" + ids[0] + ")"
	}
	const shown = 5
	list := strings.Join(ids[:min(len(ids), shown)], ", ")
	if len(ids) > shown {
		list += fmt.Sprintf(" and %d more", len(ids)-shown)
	}
	return fmt.Sprintf("%d %s (%s)", len(ids), many, list)
}

func renderRelease(w io.Writer, res contract.ReleaseResult) {
	if !res.Released {
		fmt.Fprintf(w, "Lease %s had already ended\n", res.LeaseID)
		return
	}
	fmt.Fprintf(w, "✓ Released lease %s; device %s is cleaned for the next agent\n", res.LeaseID, res.DeviceID)
}

func renderReleaseAll(w io.Writer, res contract.ReleaseAllResult) {
	fmt.Fprintf(w, "✓ Released %s; cancelled %s\n", listWords(res.Released, "lease", "leases"),
		listWords(res.Cancelled, "waiting request", "waiting requests"))
	// A lease the gateway lists but may not release (a worker's own) is
	// said with where it can be released, never passed over in silence.
	for _, s := range res.Skipped {
		fmt.Fprintf(w, "  not released: %s\n", s.Message)
	}
}

func renderCancel(w io.Writer, res contract.LeaseCancelResult) {
	switch res.Outcome {
	case contract.CancelCancelled:
		fmt.Fprintf(w, "✓ Cancelled lease request %s; it no longer waits\n", res.RequestID)
	case contract.CancelNotCancellable:
		// The error line that follows says why and what to do instead.
		fmt.Fprintf(w, "Lease request %s was not cancelled\n", dash(res.RequestID))
	default:
		fmt.Fprintln(w, "Nothing was cancelled")
	}
}

func renderRenewed(w io.Writer, rec contract.LeaseRecord, now time.Time) {
	end := time.UnixMilli(rec.TTLDeadline)
	fmt.Fprintf(w, "✓ Renewed lease %s on %s; it ends at %s (in %s) unless renewed again\n", rec.ID, rec.DeviceID,
		end.UTC().Format(time.RFC3339), roundDur(end.Sub(now)))
}

// renderRunning is a running daemon as daemon start and daemon status say
// it, from runningView.
func renderRunning(w io.Writer, out map[string]any) {
	fmt.Fprintf(w, "running (pid %v, %v, version %v)\n", out["pid"], out["health"], out["version"])
	if u, ok := out["httpUrl"]; ok {
		fmt.Fprintf(w, "HTTP API at %v\n", u)
	}
	if u, ok := out["consoleUrl"]; ok {
		fmt.Fprintf(w, "Console at %v\n", u)
	}
}

// renderStopped says the daemon is stopped: by this command, or it was not
// running.
func renderStopped(wasRunning bool) func(io.Writer) {
	return func(w io.Writer) {
		if wasRunning {
			fmt.Fprintln(w, "✓ The daemon stopped")
			return
		}
		fmt.Fprintln(w, "The daemon was not running")
	}
}

// renderConfigSet says what was written and when it takes effect; a
// secret's value is never printed.
func renderConfigSet(w io.Writer, key string, v any, secret bool, appliesAt string) {
	val := configValueWords(v)
	if secret {
		val = hiddenValue
	}
	when := "the daemon uses it from its next start (simlock daemon stop, then any command)"
	if appliesAt == appliesAtLive {
		// The uplink's backoff: a worker that keeps failing to join reads
		// it at its next attempt.
		when = "a running worker uses it within 2 s, no restart needed (at its next attempt, at most 30 s, while joining keeps failing)"
	}
	fmt.Fprintf(w, "✓ Set %s = %s; %s\n", key, val, when)
}

// renderConfig is config get: one key, or every key the daemon or file
// has, one "key = value" line each, in key order.
func renderConfig(w io.Writer, res map[string]any) {
	if k, ok := res["key"].(string); ok {
		fmt.Fprintf(w, "%s = %s\n", k, configValueWords(res["value"]))
		return
	}
	flat := map[string]any{}
	flattenConfig("", res["config"], flat)
	for _, k := range slices.Sorted(maps.Keys(flat)) {
		fmt.Fprintf(w, "%s = %s\n", k, configValueWords(flat[k]))
	}
}

func flattenConfig(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok {
		if prefix != "" {
			out[prefix] = v
		}
		return
	}
	for k, x := range m {
		if prefix != "" {
			k = prefix + "." + k
		}
		flattenConfig(k, x, out)
	}
}

// configValueWords writes a config value in the form config set takes.
func configValueWords(v any) string {
	if v == nil {
		return "unset"
	}
	var b strings.Builder
	if err := printJSON(&b, v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(b.String())
}

func renderTokenCreated(w io.Writer, res contract.TokenCreateResult) {
	label := ""
	if res.Token.Label != "" {
		label = " (" + res.Token.Label + ")"
	}
	fmt.Fprintf(w, "✓ Created %s token %s%s\n", res.Token.Role, res.Token.ID, label)
	fmt.Fprintf(w, "Secret   %s\n", res.Secret)
	fmt.Fprintln(w, "It is shown only this once: keep it now. simlock token revoke "+res.Token.ID+" ends it.")
}

func renderTokenRevoked(id string) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintf(w, "✓ Revoked token %s; its next request is refused\n", id)
	}
}

// renderWorkerDone says what drain, undrain or remove did, with the
// worker's line as list shows it.
func renderWorkerDone(done string) func(io.Writer, contract.WorkerResult) {
	return func(w io.Writer, res contract.WorkerResult) {
		fmt.Fprintf(w, "✓ Worker %s %s\n", workerName(res.Worker), done)
		renderWorkersTable(w, []contract.WorkerSummary{res.Worker}, time.Now())
	}
}

func workerName(s contract.WorkerSummary) string {
	if s.Label == "" || s.Label == s.ID {
		return s.ID
	}
	return s.ID + " (" + s.Label + ")"
}

func renderDeviceRetried(w io.Writer, res contract.DeviceRetryResult, now time.Time) {
	fmt.Fprintf(w, "✓ Retried device %s; it is now %s\n", res.Device.ID, res.Device.State)
	renderDevicesTable(w, []contract.Device{res.Device}, now)
}

func renderRequestRetried(from string) func(io.Writer, contract.LeaseRequestStatus) {
	return func(w io.Writer, res contract.LeaseRequestStatus) {
		fmt.Fprintf(w, "✓ Made request %s again as %s, for %s; simlock list --requests follows it\n",
			from, res.Request.ID, res.Request.RequesterID)
	}
}

func renderNuke(w io.Writer, res contract.NukeResult) {
	fmt.Fprintf(w, "✓ Ended %s; failed %s\n", listWords(res.Released, "lease", "leases"),
		listWords(res.Cancelled, "waiting request", "waiting requests"))
	if len(res.Deleted) > 0 {
		fmt.Fprintf(w, "Deleted %s\n", listWords(res.Deleted, "device", "devices"))
	}
	if len(res.Stopped) > 0 {
		fmt.Fprintf(w, "Shut down %s\n", listWords(res.Stopped, "device", "devices"))
	}
}

func renderCleanup(w io.Writer, res contract.CleanupRunResult) {
	if len(res.Actions) == 0 {
		fmt.Fprintln(w, "No device is idle long enough for a rule.")
		return
	}
	if res.DryRun {
		fmt.Fprintln(w, "A dry run: nothing was done. The rules would:")
	}
	rows := make([][]string, 0, len(res.Actions))
	for _, a := range res.Actions {
		result := "done"
		switch {
		case res.DryRun:
			result = "would be done"
		case a.Error != "":
			result = "failed: " + a.Error
		}
		rows = append(rows, []string{a.DeviceID, a.Action, a.Rule, "idle " + roundDur(time.Duration(a.IdleMs)*time.Millisecond), result})
	}
	table(w, "", []string{"DEVICE", "ACTION", "RULE", "IDLE", "RESULT"}, rows)
}

func renderInjected(w io.Writer, res contract.DemoInjectResult) {
	if !res.Injected {
		fmt.Fprintf(w, "Device %s: %s was not injected\n", res.DeviceID, res.Fault)
		return
	}
	fmt.Fprintf(w, "✓ Device %s will %s at its next check or operation\n", res.DeviceID, faultWords(res.Fault))
}

// faultWords says what an injected fault makes a demo device do.
func faultWords(f string) string {
	switch f {
	case "crash":
		return "crash"
	case "vanish":
		return "vanish"
	case "boot-fail":
		return "fail its next boot"
	case "reclaim-fail":
		return "fail its next clean"
	case "erase":
		return "be erased outside simlock"
	case "replace":
		return "be replaced by another device"
	}
	return f
}

func renderInstalled(w io.Writer, res contract.ComponentInstallResult) {
	name := ""
	if res.Name != "" {
		name = " (" + res.Name + ")"
	}
	if res.Outcome == "already-installed" {
		fmt.Fprintf(w, "✓ %s runtime %s%s was already installed\n", platformName(res.Platform), res.Version, name)
		return
	}
	fmt.Fprintf(w, "✓ Installed %s runtime %s%s\n", platformName(res.Platform), res.Version, name)
}

func renderRemoved(w io.Writer, res contract.ComponentRemoveResult) {
	what := platformName(res.Platform) + " runtime " + res.Version
	if res.Name != "" {
		what += " (" + res.Name + ")"
	}
	switch {
	case res.DryRun:
		fmt.Fprintf(w, "A dry run: %s can be removed (nothing was removed)\n", what)
	case res.Removed:
		fmt.Fprintf(w, "✓ Removed %s\n", what)
	default:
		fmt.Fprintf(w, "%s was not removed\n", what)
	}
}

// When a config set takes effect, as it says so (appliesAt).
const (
	appliesAtNextStart = "next daemon start"
	appliesAtLive      = "within 2 s"
)

// hiddenValue stands for a secret's value in config set's answer.
const hiddenValue = "(hidden)"

// configAppliesAt says when a running daemon uses a key config set wrote:
// the keys a worker reads as it runs (config.LiveKeys) within 2 s, the
// rest at its next start.
func configAppliesAt(key string) string {
	if config.Live(key) {
		return appliesAtLive
	}
	return appliesAtNextStart
}

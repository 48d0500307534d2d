package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// fieldFlags is, for each input field a refusal can name (its "field"
// detail), the flag a person types for it: the one table by which every
// command's refusals are said in the terms of what was typed, not of the
// wire ("--platform is required", not "platform: is required").
var fieldFlags = map[string]string{
	"platform":       "--platform",
	"model":          "--device",
	"class":          "--class",
	"osVersion":      "--os",
	"imageTag":       "--image-tag",
	"mode":           "--mode",
	"ttlMs":          "--ttl",
	"timeoutMs":      "--timeout",
	"idempotencyKey": "--idempotency-key",
	"leaseId":        "--lease-id",
	"pid":            "--bind-pid",
	"principal":      "--agent-id",
	"requesterId":    "--agent-id",
	"label":          "--label",
	"role":           "--role",
}

// fromEnvironment are the fields whose value, when its flag was not given,
// came from the environment (SIMLOCK_AGENT_ID, a session id), not from an
// empty flag: a refusal of one is not the flag's to answer for.
var fromEnvironment = map[string]bool{"principal": true, "requesterId": true}

// inCommandFlags restates err, a refusal naming an input field, in the
// terms of cmd's flag for that field (see inFlagTerms): with the value
// typed, or as the flag alone when it was not given. Any other error, or a
// field cmd has no flag for, is returned as it is.
func inCommandFlags(cmd *cobra.Command, err error) error {
	if cmd == nil || err == nil {
		return err
	}
	given := map[string][2]string{}
	for field, flag := range fieldFlags {
		f := cmd.Flags().Lookup(strings.TrimPrefix(flag, "--"))
		switch {
		case f == nil:
		case f.Changed:
			given[field] = [2]string{flag, f.Value.String()}
		case !fromEnvironment[field]:
			given[field] = [2]string{flag, ""}
		}
	}
	return inFlagTerms(err, given)
}

package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// refuseUnknownSubcommands makes every command with subcommands, at any
// depth, refuse an argument that names none of them: USAGE (exit 2) with
// cobra's suggestion, where cobra would print the group's help and exit 0
// (it checks unknown commands only at the root), so that a typo in a script
// (`simlock daemon stpo`) fails instead of passing. A group alone still
// prints its help. It runs once, on the finished tree, so a group added
// later is covered without its own code.
func refuseUnknownSubcommands(root *cobra.Command) {
	// cobra adds `completion` at Execute; adding it now puts it in the walk.
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.HasSubCommands() || c == root {
			return // the root's own check already suggests
		}
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2 // cobra's default, set only where it checks
		}
		if c.Run == nil && c.RunE == nil {
			c.Args = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return unknownSubcommand(cmd, args[0])
				}
				return nil
			}
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
			return
		}
		// A group that runs itself (lease) keeps its own argument rule; an
		// argument it refuses is said as the unknown subcommand it may be.
		if own := c.Args; own != nil {
			c.Args = func(cmd *cobra.Command, args []string) error {
				err := own(cmd, args)
				if err != nil && len(args) > 0 {
					return unknownSubcommand(cmd, args[0])
				}
				return err
			}
		}
	}
	walk(root)
}

// unknownSubcommand is the refusal of name under group, with the group's
// subcommands a typo of name could have meant.
func unknownSubcommand(group *cobra.Command, name string) error {
	msg := "unknown command \"" + name + "\" for \"" + group.CommandPath() + "\""
	if s := group.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usage("%s See %s --help", msg, group.CommandPath())
}

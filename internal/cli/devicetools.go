package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/contract"
)

// The device tool commands act on the leased device: launch and terminate
// an app, open a URL, read the log, set the location and the appearance.
// They pick the lease as the file commands do (--lease, or the caller's
// only one). What each does is a small function of a caller, the lease id
// and its inputs (below), so another transport than the socket can serve
// the same commands.

// toolCaller is what a device tool needs of a daemon: one call of an
// operation. *client.Client is one.
type toolCaller interface {
	DeviceTool(ctx context.Context, op contract.Op, in contract.DeviceToolInput, out any) error
}

// LaunchApp starts the installed app id on the lease's device, with args
// passed to it (iOS).
func LaunchApp(ctx context.Context, c toolCaller, leaseID, id string, args []string) (contract.AppLaunchResult, error) {
	var out contract.AppLaunchResult
	err := c.DeviceTool(ctx, contract.OpAppLaunch, &contract.AppLaunchInput{LeaseRef: contract.LeaseRef{LeaseID: leaseID}, AppID: id, Args: args}, &out)
	return out, err
}

// TerminateApp stops the app id on the lease's device.
func TerminateApp(ctx context.Context, c toolCaller, leaseID, id string) (contract.AppTerminateResult, error) {
	var out contract.AppTerminateResult
	err := c.DeviceTool(ctx, contract.OpAppTerminate, &contract.AppTerminateInput{LeaseRef: contract.LeaseRef{LeaseID: leaseID}, AppID: id}, &out)
	return out, err
}

// OpenURL opens url on the lease's device.
func OpenURL(ctx context.Context, c toolCaller, leaseID, url string) (contract.OpenURLResult, error) {
	var out contract.OpenURLResult
	err := c.DeviceTool(ctx, contract.OpOpenURL, &contract.OpenURLInput{LeaseRef: contract.LeaseRef{LeaseID: leaseID}, URL: url}, &out)
	return out, err
}

// DeviceLogs reads the lease's device's log as in asks (its lease is
// leaseID's).
func DeviceLogs(ctx context.Context, c toolCaller, leaseID string, in contract.DeviceLogsInput) (contract.DeviceLogs, error) {
	in.LeaseRef = contract.LeaseRef{LeaseID: leaseID}
	var out contract.DeviceLogs
	err := c.DeviceTool(ctx, contract.OpDeviceLogs, &in, &out)
	return out, err
}

// SetLocation sets the lease's device's simulated location.
func SetLocation(ctx context.Context, c toolCaller, leaseID string, lat, lon float64) (contract.LocationResult, error) {
	var out contract.LocationResult
	err := c.DeviceTool(ctx, contract.OpSetLocation, &contract.LocationInput{LeaseRef: contract.LeaseRef{LeaseID: leaseID}, Latitude: &lat, Longitude: &lon}, &out)
	return out, err
}

// SetAppearance sets the lease's device's light or dark mode.
func SetAppearance(ctx context.Context, c toolCaller, leaseID string, a contract.Appearance) (contract.AppearanceResult, error) {
	var out contract.AppearanceResult
	err := c.DeviceTool(ctx, contract.OpSetAppearance, &contract.AppearanceInput{LeaseRef: contract.LeaseRef{LeaseID: leaseID}, Appearance: a}, &out)
	return out, err
}

// checked turns a contract check's refusal of an argument into a usage
// error (exit 2), before any daemon is asked.
func checked(err error) error {
	if err == nil {
		return nil
	}
	msg := contract.AsError(err).Message
	if _, rest, ok := strings.Cut(msg, ": "); ok {
		msg = rest
	}
	return usage("%s", msg)
}

// toolCmd is a device tool command: check args, then run on the lease and
// print the result, as JSON when piped, else human's line.
func toolCmd[Out any](env Env, use, short, long string, nargs cobra.PositionalArgs, check func(args []string) error,
	run func(ctx context.Context, c agentAPI, leaseID string, args []string) (Out, error), human func(Out) string) *cobra.Command {
	var f fileFlags
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Args: nargs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := check(args); err != nil {
				return err
			}
			return f.withLease(cmd, env, func(ctx context.Context, c agentAPI, leaseID string) error {
				out, err := run(ctx, c, leaseID, args)
				if err != nil {
					return err
				}
				if jsonOut(cmd, env) {
					return printJSON(env.Stdout, out)
				}
				fmt.Fprintln(env.Stdout, human(out))
				return nil
			})
		},
	}
	f.add(cmd)
	return cmd
}

func launchCmd(env Env) *cobra.Command {
	return toolCmd(env, "launch <bundle-id-or-package> [-- <args>...] [--lease <id>]",
		"Start an installed app on the leased device",
		`Start an installed app on the leased device: by its bundle id on iOS (the
arguments after -- are passed to the app), by its package name on Android (its
launcher activity, which takes no arguments). An app the device does not have
is APP_NOT_INSTALLED. Without --lease, the lease is your only one.`,
		cobra.MinimumNArgs(1),
		func(args []string) error { return checked(contract.CheckAppID("app", args[0])) },
		func(ctx context.Context, c agentAPI, leaseID string, args []string) (contract.AppLaunchResult, error) {
			return LaunchApp(ctx, c, leaseID, args[0], args[1:])
		},
		func(r contract.AppLaunchResult) string {
			if r.PID != 0 {
				return fmt.Sprintf("Launched %s (pid %d)", r.AppID, r.PID)
			}
			return "Launched " + r.AppID
		})
}

func terminateCmd(env Env) *cobra.Command {
	return toolCmd(env, "terminate <bundle-id-or-package> [--lease <id>]",
		"Stop an app on the leased device",
		`Stop an app on the leased device, by its bundle id (iOS) or package name
(Android). An app that is not running is no error. Without --lease, the lease
is your only one.`,
		cobra.ExactArgs(1),
		func(args []string) error { return checked(contract.CheckAppID("app", args[0])) },
		func(ctx context.Context, c agentAPI, leaseID string, args []string) (contract.AppTerminateResult, error) {
			return TerminateApp(ctx, c, leaseID, args[0])
		},
		func(r contract.AppTerminateResult) string { return "Terminated " + r.AppID })
}

func openURLCmd(env Env) *cobra.Command {
	return toolCmd(env, "open-url <url> [--lease <id>]",
		"Open a URL or deep link on the leased device",
		`Open a URL on the leased device with the app that handles it: a deep link
(myapp://item/1) or a web page. It must start with its scheme, and hold no white
space (percent-encode it). Without --lease, the lease is your only one.`,
		cobra.ExactArgs(1),
		func(args []string) error { return checked(contract.CheckOpenURL("url", args[0])) },
		func(ctx context.Context, c agentAPI, leaseID string, args []string) (contract.OpenURLResult, error) {
			return OpenURL(ctx, c, leaseID, args[0])
		},
		func(r contract.OpenURLResult) string { return "Opened " + r.URL })
}

func logsCmd(env Env) *cobra.Command {
	var f fileFlags
	var lines int
	var since, process string
	cmd := &cobra.Command{
		Use:   "logs [--lines N] [--since D] [--process P] [--lease <id>]",
		Short: "Print the last lines of the leased device's log",
		Long: `Print the last lines of the leased device's log, oldest first: --lines of
them (200 by default, at most 5000), of the last --since (90s, 10m, 2h; at most
24h; whole minutes on iOS) when given, of one --process (iOS) or log tag
(Android) when given. At most 1 MiB: past it the oldest lines are left out.
Without --lease, the lease is your only one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := contract.DeviceLogsInput{Lines: lines, Process: process}
			if cmd.Flags().Changed("lines") && lines < 1 {
				return usage("--lines must be 1 to %d", contract.MaxLogLines)
			}
			if since != "" {
				d, err := durationFlag("--since", since, false)
				if err != nil {
					return err
				}
				in.SinceMs = max(d.Milliseconds(), 1)
			}
			if err := (&contract.DeviceLogsInput{LeaseRef: contract.LeaseRef{LeaseID: "check"}, Lines: in.Lines, SinceMs: in.SinceMs, Process: in.Process}).Validate(); err != nil {
				return checked(err)
			}
			return f.withLease(cmd, env, func(ctx context.Context, c agentAPI, leaseID string) error {
				out, err := DeviceLogs(ctx, c, leaseID, in)
				if err != nil {
					return err
				}
				if jsonOut(cmd, env) {
					return printJSON(env.Stdout, out)
				}
				for _, l := range out.Lines {
					fmt.Fprintln(env.Stdout, l)
				}
				if out.Truncated {
					fmt.Fprintln(env.Stderr, "(older lines left out: the answer is bounded at 1 MiB)")
				}
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&lines, "lines", 0, "how many of the last lines (default 200)")
	cmd.Flags().StringVar(&since, "since", "", "only the lines of this long before now (90s, 10m, 2h)")
	cmd.Flags().StringVar(&process, "process", "", "only the lines of this process (iOS) or log tag (Android)")
	f.add(cmd)
	return cmd
}

// degrees reads a coordinate argument.
func degrees(name, s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, usage("%s %q is not a number of degrees", name, s)
	}
	return v, nil
}

func locationCmd(env Env) *cobra.Command {
	cmd := toolCmd(env, "location [--lease <id>] <latitude> <longitude>",
		"Set the leased device's simulated location",
		`Set the location the leased device reports, in degrees: latitude -90 to 90,
longitude -180 to 180. Flags come before the coordinates, and a negative
latitude after --, as in simlock location -- -33.8568 151.2153. Without
--lease, the lease is your only one.`,
		cobra.ExactArgs(2),
		func(args []string) error {
			lat, err := degrees("latitude", args[0])
			if err != nil {
				return err
			}
			lon, err := degrees("longitude", args[1])
			if err != nil {
				return err
			}
			return checked(contract.CheckCoordinates(&lat, &lon))
		},
		func(ctx context.Context, c agentAPI, leaseID string, args []string) (contract.LocationResult, error) {
			lat, _ := strconv.ParseFloat(args[0], 64)
			lon, _ := strconv.ParseFloat(args[1], 64)
			return SetLocation(ctx, c, leaseID, lat, lon)
		},
		func(r contract.LocationResult) string {
			return fmt.Sprintf("Location set to %s, %s", strconv.FormatFloat(r.Latitude, 'f', -1, 64), strconv.FormatFloat(r.Longitude, 'f', -1, 64))
		})
	// Past the latitude, a negative longitude is an argument, not a flag.
	cmd.Flags().SetInterspersed(false)
	return cmd
}

func appearanceCmd(env Env) *cobra.Command {
	return toolCmd(env, "appearance light|dark [--lease <id>]",
		"Switch the leased device to light or dark mode",
		`Switch the leased device to light or dark mode. Without --lease, the lease is
your only one.`,
		cobra.ExactArgs(1),
		func(args []string) error {
			if a := contract.Appearance(args[0]); a != contract.AppearanceLight && a != contract.AppearanceDark {
				return usage("appearance must be light or dark, got %q", contract.Clip(args[0]))
			}
			return nil
		},
		func(ctx context.Context, c agentAPI, leaseID string, args []string) (contract.AppearanceResult, error) {
			return SetAppearance(ctx, c, leaseID, contract.Appearance(args[0]))
		},
		func(r contract.AppearanceResult) string { return "Appearance set to " + string(r.Appearance) })
}

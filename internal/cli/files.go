package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/contract"
)

// The file commands move files and apps between this machine and a leased
// device. The CLI reads and writes the local files itself, with the
// caller's own rights, and the daemon stages the bytes it receives in files
// of its own: no host path a caller names ever reaches the daemon.

// fileFlags are the flags every file command takes.
type fileFlags struct {
	lease, agent string
}

func (f *fileFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.lease, "lease", "", "the lease whose device to use (default: your only lease)")
	cmd.Flags().StringVar(&f.agent, "agent-id", "", "requester id (see simlock lease --help)")
}

// withLease runs f with a session of the caller and the lease to act on:
// --lease, or the caller's one lease.
func (f *fileFlags) withLease(cmd *cobra.Command, env Env, run func(ctx context.Context, c agentAPI, leaseID string) error) error {
	if f.lease != "" {
		if err := (&contract.LeaseIDInput{LeaseID: f.lease}).Validate(); err != nil {
			return fail(err)
		}
	}
	s := session{principal: agentID(f.agent, env.Getenv, env.PPID), autostart: true}
	return withAgent(cmd, env, s, func(ctx context.Context, c agentAPI) error {
		id := f.lease
		if id == "" {
			var err error
			if id, err = ownLease(ctx, c); err != nil {
				return err
			}
		}
		return run(ctx, c, id)
	})
}

// ownLease is the caller's lease when it holds exactly one.
func ownLease(ctx context.Context, c agentAPI) (string, error) {
	leases, err := c.Leases(ctx)
	if err != nil {
		return "", err
	}
	switch len(leases) {
	case 0:
		return "", contract.Errorf(contract.CodeUsage, "you hold no lease: lease a device first (simlock lease), or name one with --lease")
	case 1:
		return leases[0].ID, nil
	}
	ids := make([]string, len(leases))
	for i, l := range leases {
		ids[i] = l.ID
	}
	return "", contract.Errorf(contract.CodeUsage, "you hold %d leases (%s); name one with --lease", len(leases), strings.Join(ids, ", "))
}

// fileResult is what pull and screenshot print: where the bytes went.
type fileResult struct {
	LeaseID string `json:"leaseId"`
	Path    string `json:"path,omitempty"`
	File    string `json:"file"`
	Bytes   int64  `json:"bytes"`
}

func pushCmd(env Env) *cobra.Command {
	var f fileFlags
	cmd := &cobra.Command{
		Use:   "push <local-file> <device-path> [--lease <id>]",
		Short: "Copy a file of this machine to the leased device",
		Long: `Copy a local file to a path on the leased device. The path is absolute
(/sdcard/Download/data.json on Android); on iOS it is inside the device's data
directory (/Media/DCIM/...), or inside an app's data container with
@<bundle id>/... (@com.example.app/Documents/data.json). The CLI reads the file;
the daemon never opens a path you name. "-" reads standard input.
Without --lease, the lease is your only one.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := contract.CheckDevicePath("device-path", args[1]); err != nil {
				return usage("%s", strings.TrimPrefix(err.(*contract.Error).Message, "device-path: "))
			}
			r, size, closeFile, err := openLocal(env, args[0])
			if err != nil {
				return err
			}
			defer closeFile()
			return f.withLease(cmd, env, func(ctx context.Context, c agentAPI, leaseID string) error {
				res, err := c.PushFile(ctx, contract.FilesPutInput{LeaseID: leaseID, Path: args[1], Size: size}, r)
				if err != nil {
					return err
				}
				if jsonOut(cmd, env) {
					return printJSON(env.Stdout, res)
				}
				fmt.Fprintf(env.Stdout, "Pushed %s to %s on lease %s\n", sizeHuman(res.Bytes), res.Path, res.LeaseID)
				return nil
			})
		},
	}
	f.add(cmd)
	return cmd
}

func installCmd(env Env) *cobra.Command {
	var f fileFlags
	cmd := &cobra.Command{
		Use:   "install <app> [--lease <id>]",
		Short: "Install an app (.apk, .ipa or zipped .app) on the leased device",
		Long: `Install an app on the leased device: an .apk on Android; an .ipa, or a zip
of a simulator .app bundle, on iOS. The daemon tells them apart by their
content, and answers what it installed (the package name or bundle id).
"-" reads standard input. Without --lease, the lease is your only one.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, size, closeFile, err := openLocal(env, args[0])
			if err != nil {
				return err
			}
			defer closeFile()
			return f.withLease(cmd, env, func(ctx context.Context, c agentAPI, leaseID string) error {
				res, err := c.InstallApp(ctx, contract.AppInstallInput{LeaseID: leaseID, Size: size}, r)
				if err != nil {
					return err
				}
				if jsonOut(cmd, env) {
					return printJSON(env.Stdout, res)
				}
				what := string(res.App.Kind)
				if res.App.ID != "" {
					what = res.App.ID
				}
				fmt.Fprintf(env.Stdout, "Installed %s on lease %s\n", what, res.LeaseID)
				return nil
			})
		},
	}
	f.add(cmd)
	return cmd
}

func pullCmd(env Env) *cobra.Command {
	var f fileFlags
	cmd := &cobra.Command{
		Use:   "pull <device-path> [<local-file>|-] [--lease <id>]",
		Short: "Copy a file of the leased device to this machine",
		Long: `Copy a file of the leased device (a path as simlock push takes) to a local
file: by default its name in the current directory; "-" writes it to standard
output. The file appears whole or not at all. Without --lease, the lease is
your only one.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := contract.CheckDevicePath("device-path", args[0]); err != nil {
				return usage("%s", strings.TrimPrefix(err.(*contract.Error).Message, "device-path: "))
			}
			local := path.Base(args[0])
			if len(args) == 2 {
				local = args[1]
			}
			return f.withLease(cmd, env, func(ctx context.Context, c agentAPI, leaseID string) error {
				return receive(cmd, env, local, fileResult{LeaseID: leaseID, Path: args[0]}, func(w func(contract.TransferInfo) (io.Writer, error)) (int64, error) {
					_, n, err := c.PullFile(ctx, contract.FilesGetInput{LeaseID: leaseID, Path: args[0]}, w)
					return n, err
				})
			})
		},
	}
	f.add(cmd)
	return cmd
}

func screenshotCmd(env Env) *cobra.Command {
	var f fileFlags
	cmd := &cobra.Command{
		Use:   "screenshot [<file.png>|-] [--lease <id>]",
		Short: "Save a PNG of the leased device's screen",
		Long: `Save a PNG of the leased device's screen: by default as
screenshot-<time>.png in the current directory; "-" writes it to standard
output. Without --lease, the lease is your only one.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			local := "screenshot-" + time.Now().Format("20060102-150405") + ".png"
			if len(args) == 1 {
				local = args[0]
			}
			return f.withLease(cmd, env, func(ctx context.Context, c agentAPI, leaseID string) error {
				return receive(cmd, env, local, fileResult{LeaseID: leaseID}, func(w func(contract.TransferInfo) (io.Writer, error)) (int64, error) {
					_, n, err := c.Screenshot(ctx, contract.ScreenshotInput{LeaseID: leaseID}, w)
					return n, err
				})
			})
		},
	}
	f.add(cmd)
	return cmd
}

// openLocal opens a local file to send ("-": standard input) and says its
// size when it is a regular file.
func openLocal(env Env, name string) (io.Reader, *int64, func(), error) {
	if name == "-" {
		return env.Stdin, nil, func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, nil, usage("cannot read %s: %v", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, nil, usage("cannot read %s: %v", name, err)
	}
	if !st.Mode().IsRegular() {
		return f, nil, func() { f.Close() }, nil
	}
	n := st.Size()
	return f, &n, func() { f.Close() }, nil
}

// receive writes what get downloads to local ("-": standard output): into
// a temporary file beside it, renamed into place once whole.
func receive(cmd *cobra.Command, env Env, local string, res fileResult, get func(func(contract.TransferInfo) (io.Writer, error)) (int64, error)) error {
	if local == "-" {
		n, err := get(func(contract.TransferInfo) (io.Writer, error) { return env.Stdout, nil })
		if err == nil && !jsonOut(cmd, env) {
			fmt.Fprintf(env.Stderr, "Wrote %s to standard output\n", sizeHuman(n))
		}
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(local), "."+filepath.Base(local)+".simlock-*")
	if err != nil {
		return usage("cannot write %s: %v", local, err)
	}
	defer os.Remove(tmp.Name()) // gone once renamed; removed if not
	n, err := get(func(contract.TransferInfo) (io.Writer, error) { return tmp, nil })
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = usage("cannot write %s: %v", local, cerr)
	}
	if err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return usage("cannot write %s: %v", local, err)
	}
	if err := os.Rename(tmp.Name(), local); err != nil {
		return usage("cannot write %s: %v", local, err)
	}
	res.File, res.Bytes = local, n
	if jsonOut(cmd, env) {
		return printJSON(env.Stdout, res)
	}
	fmt.Fprintf(env.Stdout, "Wrote %s to %s\n", sizeHuman(n), local)
	return nil
}

// sizeHuman is a byte count for people.
func sizeHuman(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n == 1:
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

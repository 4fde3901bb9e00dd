package main

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/tlsutil"
)

// defaultAddr is the API address the client commands dial by default.
const defaultAddr = "127.0.0.1:8848"

// app holds one invocation's I/O, environment and flag values.
type app struct {
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)
	// startNode opens and starts a Roster node; it returns the address the API listens
	// on and a function that stops the node.
	startNode func(o nodeOptions, log *slog.Logger) (httpAddr string, stop func() error, err error)
	// TLS of the client commands (--ca-file, --cert-file, --key-file; tlsFlags); tlsConfig
	// is built from them before the command runs (nil: none given).
	tlsFiles  tlsutil.Files
	tlsConfig *tls.Config

	// Flags shared by the client commands.
	addr    string
	output  string
	timeout time.Duration
	token   string
}

func newApp(stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) *app {
	return &app{stdout: stdout, stderr: stderr, lookupEnv: lookupEnv, startNode: startNode}
}

// rootCmd builds the command tree.
func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "roster",
		Short: "Roster: a CP service registry",
		Long: "Roster is a CP registry for persistent service instances.\n\n" +
			"Every flag can also be set by an environment variable: --http-addr ⇔ ROSTER_HTTP_ADDR\n" +
			"(a flag given on the command line wins). The client commands print tables, or JSON\n" +
			"with -o json. Shell completion: roster completion bash|zsh|fish|powershell --help.\n\n" +
			"Exit codes: 0 success; 1 the command failed (an error answered by the API, a node\n" +
			"that cannot be reached or is not ready, ...); 2 the command line is wrong (unknown\n" +
			"command or flag, bad value, wrong arguments): nothing was sent or started.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Get().Version,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags(), a.lookupEnv); err != nil {
				return asUsage(err)
			}
			if f := cmd.Flags().Lookup("output"); f != nil && a.output != outputTable && a.output != outputJSON {
				return usagef("--output %q: must be %s or %s", a.output, outputTable, outputJSON)
			}
			return a.loadClientTLS(cmd)
		},
	}
	var version strings.Builder
	_ = writeVersion(&version, currentBuild())
	// cobra prints the template as a text/template: keep the text literal.
	root.SetVersionTemplate("{{" + strconv.Quote(version.String()) + "}}")
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		a.serverCmd(),
		a.devCmd(),
		a.registerCmd(),
		a.deregisterCmd(),
		a.updateCmd(),
		a.setHealthCmd(),
		a.instancesCmd(),
		a.healthCmd(),
		a.servicesCmd(),
		a.namespacesCmd(),
		a.clusterConfigCmd(),
		a.watchCmd(),
		a.nacosWatchCmd(),
		a.leaderCmd(),
		a.membersCmd(),
		a.joinCmd(),
		a.readyCmd(),
		a.settingsCmd(),
		a.tlsCmd(),
		a.versionCmd(),
		a.snapshotCmd(),
		a.recoverCmd(),
		a.checkCmd(),
		a.aclCmd(),
		a.autopilotCmd(),
		a.demoBackendCmd(),
	)
	// cobra's `completion` command (bash, zsh, fish, powershell), added now rather than
	// when the command line runs, so that it is part of the tree walked below.
	root.InitDefaultCompletionCmd()
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command that only groups others (roster acl,
// snapshot, tls, completion...) print its help when called alone, as cobra does, but
// fail with a usage error when called with an unknown subcommand, where cobra would
// print the help and exit 0.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		refuseUnknownSubcommands(c)
	}
	if cmd.Runnable() || !cmd.HasSubCommands() || !cmd.HasParent() {
		return
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown command %q for %q", args[0], c.CommandPath())
		}
		return c.Help()
	}
}

// clientFlags adds the flags every client command shares.
func (a *app) clientFlags(cmd *cobra.Command) {
	a.tlsFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&a.addr, "addr", defaultAddr, "API address of any Roster node (host:port or URL)")
	fs.StringVarP(&a.output, "output", "o", outputTable, "output format: table or json")
	fs.DurationVar(&a.timeout, "timeout", client.DefaultTimeout, "request timeout")
	fs.StringVar(&a.token, "token", "", "ACL token secret to present (clusters with ACLs need one)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputTable, outputJSON}, cobra.ShellCompDirectiveNoFileComp))
}

// client returns an API client for --addr, presenting --token.
func (a *app) client() *client.Client {
	return client.New(a.addr, client.WithTimeout(a.timeout), client.WithToken(a.token), client.WithTLSConfig(a.tlsConfig))
}

// exactArgs is cobra.ExactArgs with a message that shows the usage.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("usage: %s (got %d argument(s), want %d)", cmd.UseLine(), len(args), n)
		}
		return nil
	}
}

// ctxOf returns the command's context (Background when run without one).
func ctxOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

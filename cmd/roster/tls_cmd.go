package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/tlsutil"
)

// tlsCmd builds `roster tls`: a CA and node certificates for the cluster's TLS.
func (a *app) tlsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Create a CA and node certificates for TLS",
		Long: "Create the files TLS needs (docs/security.md): a cluster CA, then one certificate per node,\n" +
			"signed by it, which the node uses as both its server and its client certificate.\n" +
			"The same certificates serve clients that must present one (--tls-verify-incoming).",
		Example: "  roster tls ca create --dir tls\n" +
			"  roster tls cert create --dir tls --node n1 --dns roster1.example --ip 127.0.1.1",
		Args: exactArgs(0),
	}
	ca := &cobra.Command{Use: "ca", Short: "Manage the cluster CA", Args: exactArgs(0)}
	ca.AddCommand(a.tlsCACreateCmd())
	cert := &cobra.Command{Use: "cert", Short: "Manage node certificates", Args: exactArgs(0)}
	cert.AddCommand(a.tlsCertCreateCmd())
	cmd.AddCommand(ca, cert)
	return cmd
}

func (a *app) tlsCACreateCmd() *cobra.Command {
	var o tlsutil.CAOptions
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a CA: DIR/ca.pem and DIR/ca-key.pem",
		Long: "Create a self-signed CA (ECDSA P-256) that signs the cluster's node certificates:\n" +
			"DIR/ca.pem (give it to every node and client as --tls-ca-file / --ca-file) and\n" +
			"DIR/ca-key.pem (mode 0600; keep it off the nodes, it is only needed to sign certificates).\n" +
			"Existing files are never overwritten without --force.",
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			if err := positiveDays(o.Days); err != nil {
				return err
			}
			certFile, keyFile, err := tlsutil.CreateCA(o)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote %s (the CA certificate)\nwrote %s (its key: keep it secret)\n", certFile, keyFile)
			return a.printValidity(certFile)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Dir, "dir", ".", "directory to write the files to (created 0700 when missing)")
	fs.IntVar(&o.Days, "days", tlsutil.DefaultCADays, fmt.Sprintf("days the CA is valid (1 to %d)", tlsutil.MaxDays))
	fs.BoolVar(&o.Force, "force", false, "replace existing files")
	return cmd
}

func (a *app) tlsCertCreateCmd() *cobra.Command {
	var o tlsutil.CertOptions
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a node certificate: DIR/NODE.pem and DIR/NODE-key.pem",
		Long: "Create a certificate (ECDSA P-256) signed by the CA in DIR (DIR/ca.pem, DIR/ca-key.pem), for\n" +
			"use as both server and client certificate: DIR/NODE.pem and DIR/NODE-key.pem (mode 0600).\n" +
			"It is valid for localhost, 127.0.0.1 and ::1, plus every --dns name and --ip address: list\n" +
			"the names and addresses clients reach the node at (nodes themselves check only that a\n" +
			"peer's certificate is signed by the CA). Existing files are never overwritten without --force.",
		Example: "  roster tls cert create --dir tls --node n1 --dns roster1.example --ip 127.0.1.1",
		Args:    exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			if o.Node == "" {
				return usagef("--node is required (or %s)", envName("node"))
			}
			if err := positiveDays(o.Days); err != nil {
				return err
			}
			certFile, keyFile, err := tlsutil.CreateCert(o)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote %s (the certificate of %s)\nwrote %s (its key: keep it secret)\n", certFile, o.Node, keyFile)
			return a.printValidity(certFile)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Dir, "dir", ".", "directory of the CA, where the files are written")
	fs.StringVar(&o.Node, "node", "", "node name: names the files and is the certificate's common name (letters, digits, '.', '_', '-'; required)")
	fs.StringSliceVar(&o.DNSNames, "dns", nil, "DNS name clients reach the node at (repeat or comma-separate; localhost is always included)")
	fs.StringSliceVar(&o.IPs, "ip", nil, "IP address clients reach the node at (repeat or comma-separate; 127.0.0.1 and ::1 are always included)")
	fs.IntVar(&o.Days, "days", tlsutil.DefaultCertDays, fmt.Sprintf("days the certificate is valid (1 to %d; not beyond the CA)", tlsutil.MaxDays))
	fs.BoolVar(&o.Force, "force", false, "replace existing files")
	return cmd
}

// positiveDays refuses --days 0, which tlsutil would read as its default.
func positiveDays(days int) error {
	if days < 1 {
		return usagef("--days %d: must be 1 to %d", days, tlsutil.MaxDays)
	}
	return nil
}

// printValidity prints the names and the expiry of the certificate in file.
func (a *app) printValidity(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return fmt.Errorf("%s: no PEM block", file)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return err
	}
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) > 0 {
		fmt.Fprintf(a.stdout, "valid for: %s\n", strings.Join(names, ", "))
	}
	fmt.Fprintf(a.stdout, "expires: %s\n", c.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// tlsFlags adds the TLS flags of the commands that talk to a node.
func (a *app) tlsFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&a.tlsFiles.CAFile, "ca-file", "", "CA certificate(s) (PEM) to verify the node's certificate with (default: the system's); with it an --addr without a scheme is https")
	fs.StringVar(&a.tlsFiles.CertFile, "cert-file", "", "client certificate (PEM) to present, for nodes started with --tls-verify-incoming (with --key-file)")
	fs.StringVar(&a.tlsFiles.KeyFile, "key-file", "", "key of --cert-file (PEM)")
}

// loadClientTLS builds the TLS configuration of a command with tlsFlags from the files
// given, before the command runs (none given: plain HTTP unless --addr says https://).
func (a *app) loadClientTLS(cmd *cobra.Command) error {
	if cmd.Flags().Lookup("ca-file") == nil || a.tlsFiles.IsZero() {
		return nil
	}
	cfg, err := tlsutil.ClientConfig(a.tlsFiles)
	if err != nil {
		return fmt.Errorf("--ca-file/--cert-file/--key-file: %w", err)
	}
	a.tlsConfig = cfg
	return nil
}

// serverTLSFlags adds the --tls-* flags of `roster server`.
func serverTLSFlags(fs *pflag.FlagSet, o *nodeOptions) {
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "this node's certificate (PEM); with --tls-key-file and --tls-ca-file: HTTPS-only API, mutual TLS between nodes (docs/security.md)")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "key of --tls-cert-file (PEM)")
	fs.StringVar(&o.TLSCAFile, "tls-ca-file", "", "CA certificate(s) (PEM) that every node's and client's certificate must be signed by")
	fs.BoolVar(&o.TLSVerifyIncoming, "tls-verify-incoming", false, "require a client certificate signed by the CA on the HTTP and Nacos gRPC APIs")
}

// tlsConfig is the node's TLS configuration.
func (o nodeOptions) tlsConfig() server.TLSConfig {
	return server.TLSConfig{CertFile: o.TLSCertFile, KeyFile: o.TLSKeyFile, CAFile: o.TLSCAFile, VerifyIncoming: o.TLSVerifyIncoming}
}

// validateTLS refuses a partial TLS configuration before anything starts.
func (o nodeOptions) validateTLS() error {
	files := []struct{ flag, v string }{{"--tls-cert-file", o.TLSCertFile}, {"--tls-key-file", o.TLSKeyFile}, {"--tls-ca-file", o.TLSCAFile}}
	var given, missing []string
	for _, f := range files {
		if f.v == "" {
			missing = append(missing, f.flag)
		} else {
			given = append(given, f.flag)
		}
	}
	switch {
	case len(given) > 0 && len(missing) > 0:
		return fmt.Errorf("--tls-cert-file, --tls-key-file and --tls-ca-file go together: %s given without %s",
			strings.Join(given, ", "), strings.Join(missing, " and "))
	case len(given) == 0 && o.TLSVerifyIncoming:
		return errors.New("--tls-verify-incoming needs --tls-cert-file, --tls-key-file and --tls-ca-file")
	}
	return nil
}

package main

import (
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/model"
)

// checkTypes are the values of `cluster-config --check`, in the order the help lists them.
var checkTypes = []string{"none", "tcp", "http", "https", "tls", "grpc", "mysql"}

// confirmModes are the values of `cluster-config --confirm`.
var confirmModes = []string{string(model.ConfirmMajority), string(model.ConfirmLeader)}

// clusterFlags are the settings `roster cluster-config` writes; a flag not given keeps
// the cluster's current value.
type clusterFlags struct {
	check           string
	port            int
	path            string
	headers         []string
	removeHeaders   []string
	expectedStatus  string
	interval        time.Duration
	checkTimeout    time.Duration
	rise, fall      int
	confirm         string
	deregisterAfter time.Duration
	tlsServerName   string
	tlsSkipVerify   bool
	tlsCABundle     string // a file
	grpcService     string
	grpcTLS         bool
	user            string
	passwordFile    string
	query           string
	meta            []string
	removeMeta      []string
}

// A check field group is the set of flags that apply only to some check types.
type checkFieldGroup struct {
	flags   []string
	applies func(typ string, grpcTLS bool) bool
	what    string // the types it applies to, for messages
	clear   func(s *api.HealthCheckSpec)
}

var checkFieldGroups = []checkFieldGroup{
	{
		flags:   []string{"path", "header", "remove-header", "expected-status"},
		applies: func(typ string, _ bool) bool { return typ == api.CheckHTTP || typ == api.CheckHTTPS },
		what:    "http and https checks",
		clear:   func(s *api.HealthCheckSpec) { s.Path, s.Headers, s.ExpectedStatus = "", nil, nil },
	},
	{
		flags: []string{"tls-server-name", "tls-skip-verify", "tls-ca-bundle"},
		applies: func(typ string, grpcTLS bool) bool {
			return typ == api.CheckHTTPS || typ == api.CheckTLS || (typ == api.CheckGRPC && grpcTLS)
		},
		what:  "https and tls checks, and grpc checks with --grpc-tls",
		clear: func(s *api.HealthCheckSpec) { s.TLSServerName, s.TLSSkipVerify, s.TLSCAPEM = "", false, "" },
	},
	{
		flags:   []string{"grpc-service", "grpc-tls"},
		applies: func(typ string, _ bool) bool { return typ == api.CheckGRPC },
		what:    "grpc checks",
		clear:   func(s *api.HealthCheckSpec) { s.GRPCService, s.GRPCTLS = "", false },
	},
	{
		flags:   []string{"user", "password-file", "query"},
		applies: func(typ string, _ bool) bool { return typ == api.CheckMySQL },
		what:    "mysql checks",
		clear:   func(s *api.HealthCheckSpec) { s.User, s.Password, s.Query = "", "", "" },
	},
}

// clusterSettingFlags are the flags that make cluster-config write.
var clusterSettingFlags = []string{
	"check", "port", "path", "header", "remove-header", "expected-status", "interval", "check-timeout",
	"rise", "fall", "confirm", "deregister-after", "tls-server-name", "tls-skip-verify", "tls-ca-bundle",
	"grpc-service", "grpc-tls", "user", "password-file", "query", "meta", "remove-meta",
}

func (a *app) clusterConfigCmd() *cobra.Command {
	var (
		sc scope
		f  clusterFlags
	)
	cmd := &cobra.Command{
		Use:   "cluster-config SERVICE [CLUSTER]",
		Short: "Show or change a cluster's health check and metadata",
		Long: "Without setting flags, show the health check and metadata of cluster CLUSTER (default\n" +
			api.DefaultCluster + ") of SERVICE. With them, change what they name and keep the rest: the\n" +
			"command reads the cluster, merges the flags and writes it back (PUT .../clusters/{cluster})\n" +
			"only if it has not changed since, retrying a few times if it has; a cluster that does not\n" +
			"exist is created (with the service) from the defaults: TCP on the instance's port,\n" +
			"interval 5s, timeout 2s, rise 2, fall 3.\n\n" +
			"Check types: none (health is set by hand: roster set-health), tcp, http, https, tls, grpc\n" +
			"and mysql. Some flags apply only to some types: --path, --header, --remove-header and\n" +
			"--expected-status to http and https; --tls-server-name, --tls-skip-verify and\n" +
			"--tls-ca-bundle to https, tls, and grpc with --grpc-tls; --grpc-service and --grpc-tls to\n" +
			"grpc; --user, --password-file and --query to mysql. When --check changes the type, the\n" +
			"settings that do not apply to the new type are dropped. --check-timeout is the probe's\n" +
			"timeout (--timeout is the request's, as for every client command). A MYSQL password is\n" +
			"never shown; rewriting the cluster keeps it unless --password-file is given.",
		Example: "  roster cluster-config orders\n" +
			"  roster cluster-config orders east --check http --path /healthz --expected-status 200,204 --interval 10s\n" +
			"  roster cluster-config orders --check https --tls-server-name orders.internal --tls-ca-bundle ca.pem\n" +
			"  roster cluster-config orders-db --check mysql --user probe --password-file probe.pw --confirm leader\n" +
			"  roster cluster-config batch --check none",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("usage: %s (got %d argument(s), want 1 or 2)", cmd.UseLine(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cluster := api.DefaultCluster
			if len(args) == 2 {
				cluster = args[1]
			}
			if strings.TrimSpace(args[0]) == "" || strings.TrimSpace(cluster) == "" {
				return usagef("usage: %s: SERVICE and CLUSTER must not be empty", cmd.UseLine())
			}
			fs := cmd.Flags()
			writes := slices.ContainsFunc(clusterSettingFlags, fs.Changed)
			if !writes {
				return a.showCluster(cmd, sc, args[0], cluster)
			}
			edit, err := f.parse(fs)
			if err != nil {
				return err
			}
			ctx := ctxOf(cmd)
			c := a.client()
			var idx uint64
			for attempt := 1; ; attempt++ {
				cur, _, rerr := c.Cluster(ctx, sc.namespace, sc.group, args[0], cluster, client.QueryOptions{})
				exists := rerr == nil
				if rerr != nil && !client.IsNotFound(rerr) {
					return rerr
				}
				req, cerr := edit.apply(fs, cur.Cluster, exists)
				if cerr != nil {
					return cerr
				}
				var cas uint64
				if exists {
					cas = cur.Cluster.ModifyIndex
				}
				idx, err = c.UpsertClusterIf(ctx, sc.namespace, sc.group, args[0], cluster, cas, req)
				if !client.IsCASMismatch(err) || attempt == casAttempts {
					break
				}
			}
			if client.IsCASMismatch(err) {
				return fmt.Errorf("the cluster kept changing while the flags were merged into it; run the command again: %w", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "cluster %s of %s in %s/%s written at index %d\n",
				safeText(cluster), safeText(args[0]), safeText(sc.namespace), safeText(sc.group), idx)
			return a.showCluster(cmd, sc, args[0], cluster)
		},
	}
	sc.flags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&f.check, "check", "", "check type: "+strings.Join(checkTypes, ", "))
	fs.IntVar(&f.port, "port", 0, "port the check connects to (0: each instance's own port)")
	fs.StringVar(&f.path, "path", "", "http/https: path of the request, starting with /")
	fs.StringArrayVar(&f.headers, "header", nil, "http/https: request header Name=value to add or replace (repeatable)")
	fs.StringArrayVar(&f.removeHeaders, "remove-header", nil, "http/https: request header to remove (repeatable)")
	fs.StringVar(&f.expectedStatus, "expected-status", "", `http/https: healthy status codes, comma-separated ("": any of 200..399)`)
	fs.DurationVar(&f.interval, "interval", 0, fmt.Sprintf("time between probes (%s to %s)", model.MinCheckInterval, model.MaxCheckInterval))
	fs.DurationVar(&f.checkTimeout, "check-timeout", 0, "bound on each probe, less than the interval")
	fs.IntVar(&f.rise, "rise", 0, fmt.Sprintf("consecutive successes that make an instance healthy (1 to %d)", model.MaxRiseFall))
	fs.IntVar(&f.fall, "fall", 0, fmt.Sprintf("consecutive failures that make an instance unhealthy (1 to %d)", model.MaxRiseFall))
	fs.StringVar(&f.confirm, "confirm", "", "who decides a health change: majority (the voters confirm it) or leader")
	fs.DurationVar(&f.deregisterAfter, "deregister-after", 0, "deregister an instance unhealthy for this long (0: never)")
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "name the server's certificate is verified against (empty: the instance's address)")
	fs.BoolVar(&f.tlsSkipVerify, "tls-skip-verify", false, "accept any server certificate")
	fs.StringVar(&f.tlsCABundle, "tls-ca-bundle", "", `PEM file of the CA certificates that verify the server ("": the system roots)`)
	fs.StringVar(&f.grpcService, "grpc-service", "", "grpc: service name asked of the health server (empty: the server as a whole)")
	fs.BoolVar(&f.grpcTLS, "grpc-tls", false, "grpc: connect over TLS")
	fs.StringVar(&f.user, "user", "", "mysql: user the check logs in as (required for mysql)")
	fs.StringVar(&f.passwordFile, "password-file", "", "mysql: file holding the password (a trailing newline is dropped)")
	fs.StringVar(&f.query, "query", "", "mysql: query the check runs (default "+model.DefaultMySQLQuery+")")
	fs.StringArrayVar(&f.meta, "meta", nil, "cluster metadata key=value to add or replace (repeatable)")
	fs.StringArrayVar(&f.removeMeta, "remove-meta", nil, "cluster metadata key to remove (repeatable)")
	a.clientFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("check", cobra.FixedCompletions(checkTypes, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("confirm", cobra.FixedCompletions(confirmModes, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// clusterEdit is the checked content of cluster-config's setting flags.
type clusterEdit struct {
	f              *clusterFlags
	typ            string // upper case; "" when --check is not given
	expectedStatus []int
	headers        map[string]string
	caPEM          string
	password       string
	meta           map[string]string
}

// parse checks the setting flags given, before anything is sent.
func (f *clusterFlags) parse(fs *pflag.FlagSet) (*clusterEdit, error) {
	e := &clusterEdit{f: f}
	if fs.Changed("check") {
		t := strings.ToLower(strings.TrimSpace(f.check))
		if !slices.Contains(checkTypes, t) {
			return nil, usagef("--check %q: want one of %s", f.check, strings.Join(checkTypes, ", "))
		}
		e.typ = strings.ToUpper(t)
	}
	if fs.Changed("confirm") && !slices.Contains(confirmModes, strings.ToLower(f.confirm)) {
		return nil, usagef("--confirm %q: want majority or leader", f.confirm)
	}
	if f.port < 0 || f.port > 65535 {
		return nil, usagef("--port %d: must be between 0 (the instance's port) and 65535", f.port)
	}
	for _, rf := range []struct {
		name string
		v    int
	}{{"rise", f.rise}, {"fall", f.fall}} {
		if fs.Changed(rf.name) && (rf.v < 1 || rf.v > model.MaxRiseFall) {
			return nil, usagef("--%s %d: must be between 1 and %d", rf.name, rf.v, model.MaxRiseFall)
		}
	}
	if fs.Changed("interval") && (f.interval < model.MinCheckInterval || f.interval > model.MaxCheckInterval) {
		return nil, usagef("--interval %s: must be between %s and %s", f.interval, model.MinCheckInterval, model.MaxCheckInterval)
	}
	if fs.Changed("check-timeout") && f.checkTimeout <= 0 {
		return nil, usagef("--check-timeout %s: must be positive", f.checkTimeout)
	}
	if f.deregisterAfter < 0 {
		return nil, usagef("--deregister-after %s: must not be negative (0: never)", f.deregisterAfter)
	}
	if fs.Changed("path") && !strings.HasPrefix(f.path, "/") {
		return nil, usagef("--path %q: must start with /", f.path)
	}
	if s := strings.TrimSpace(f.expectedStatus); s != "" {
		for _, part := range strings.Split(s, ",") {
			code, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil || code < 100 || code > 599 {
				return nil, usagef("--expected-status %q: want HTTP status codes (100..599), comma-separated", f.expectedStatus)
			}
			e.expectedStatus = append(e.expectedStatus, code)
		}
	}
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, "=")
		if !ok || name == "" || strings.ContainsAny(name, " \t:") {
			return nil, usagef("--header %q: want Name=value", h)
		}
		if e.headers == nil {
			e.headers = map[string]string{}
		}
		e.headers[name] = value
	}
	for _, name := range f.removeHeaders {
		if name == "" {
			return nil, usagef("--remove-header: the name must not be empty")
		}
		for set := range e.headers {
			if strings.EqualFold(set, name) {
				return nil, usagef("--header and --remove-header both name %q: give one", name)
			}
		}
	}
	if fs.Changed("tls-ca-bundle") && f.tlsCABundle != "" {
		b, err := os.ReadFile(f.tlsCABundle)
		if err != nil {
			return nil, usagef("--tls-ca-bundle: %w", err)
		}
		if !hasPEMCertificate(b) {
			return nil, usagef("--tls-ca-bundle %s: no PEM CERTIFICATE block", f.tlsCABundle)
		}
		e.caPEM = string(b)
	}
	if fs.Changed("password-file") {
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return nil, usagef("--password-file: %w", err)
		}
		e.password = strings.TrimRight(string(b), "\r\n")
	}
	md, err := parseMeta(f.meta)
	if err != nil {
		return nil, err
	}
	for _, k := range f.removeMeta {
		if k == "" {
			return nil, usagef("--remove-meta: the key must not be empty")
		}
		if _, both := md[k]; both {
			return nil, usagef("--meta and --remove-meta both name %q: give one", k)
		}
	}
	e.meta = md
	if e.typ != "" {
		// The type is known before the cluster is read: refuse now what cannot apply
		// (grpcTls counts as on unless given: the cluster's value is not known yet).
		if err := e.checkApplies(fs, e.typ, e.grpcTLS(fs, true)); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// grpcTLS is whether the written check uses gRPC over TLS: the flag when given, else
// what the cluster has.
func (e *clusterEdit) grpcTLS(fs *pflag.FlagSet, current bool) bool {
	if fs.Changed("grpc-tls") {
		return e.f.grpcTLS
	}
	return current
}

// checkApplies refuses a flag given for a check it does not apply to.
func (e *clusterEdit) checkApplies(fs *pflag.FlagSet, typ string, grpcTLS bool) error {
	for _, g := range checkFieldGroups {
		if g.applies(typ, grpcTLS) {
			continue
		}
		for _, name := range g.flags {
			if fs.Changed(name) {
				return usagef("--%s applies to %s only; the check is %s", name, g.what, strings.ToLower(typ))
			}
		}
	}
	if typ == api.CheckMySQL && fs.Changed("user") && strings.TrimSpace(e.f.user) == "" {
		return usagef("--user must not be empty for a mysql check")
	}
	return nil
}

// apply merges the flags into the cluster read (cur; the defaults when !exists) and
// returns the request that writes the result.
func (e *clusterEdit) apply(fs *pflag.FlagSet, cur api.Cluster, exists bool) (api.ClusterRequest, error) {
	var spec api.HealthCheckSpec
	md := map[string]string{}
	if exists {
		spec = specOf(cur.HealthCheck)
		maps.Copy(md, cur.Metadata)
	}
	if spec.Type == "" {
		spec.Type = api.CheckTCP
	}
	if e.typ != "" {
		spec.Type = e.typ
	}
	spec.GRPCTLS = e.grpcTLS(fs, spec.GRPCTLS)
	if err := e.checkApplies(fs, spec.Type, spec.GRPCTLS); err != nil {
		return api.ClusterRequest{}, err
	}
	// What the cluster has that does not apply to the check written is dropped (after a
	// change of type, or of grpcTls).
	for _, g := range checkFieldGroups {
		if !g.applies(spec.Type, spec.GRPCTLS) {
			g.clear(&spec)
		}
	}
	f := e.f
	if fs.Changed("port") {
		spec.Port = f.port
	}
	if fs.Changed("path") {
		spec.Path = f.path
	}
	if len(e.headers) > 0 || len(f.removeHeaders) > 0 {
		h := maps.Clone(spec.Headers)
		if h == nil {
			h = map[string]string{}
		}
		for name, value := range e.headers {
			deleteFold(h, name)
			h[name] = value
		}
		for _, name := range f.removeHeaders {
			deleteFold(h, name)
		}
		spec.Headers = h
	}
	if fs.Changed("expected-status") {
		spec.ExpectedStatus = e.expectedStatus
	}
	if fs.Changed("interval") {
		spec.Interval = f.interval.String()
	}
	if fs.Changed("check-timeout") {
		spec.Timeout = f.checkTimeout.String()
	}
	if fs.Changed("rise") {
		spec.Rise = f.rise
	}
	if fs.Changed("fall") {
		spec.Fall = f.fall
	}
	if fs.Changed("confirm") {
		spec.Confirm = strings.ToLower(f.confirm)
	}
	if fs.Changed("deregister-after") {
		spec.DeregisterAfter = f.deregisterAfter.String()
	}
	if fs.Changed("tls-server-name") {
		spec.TLSServerName = f.tlsServerName
	}
	if fs.Changed("tls-skip-verify") {
		spec.TLSSkipVerify = f.tlsSkipVerify
	}
	if fs.Changed("tls-ca-bundle") {
		spec.TLSCAPEM = e.caPEM
	}
	if fs.Changed("grpc-service") {
		spec.GRPCService = f.grpcService
	}
	if fs.Changed("user") {
		spec.User = f.user
	}
	if fs.Changed("password-file") {
		spec.Password = e.password
	}
	if fs.Changed("query") {
		spec.Query = f.query
	}
	if spec.Type == api.CheckMySQL && spec.User == "" {
		return api.ClusterRequest{}, usagef("--user is required for a mysql check")
	}
	maps.Copy(md, e.meta)
	for _, k := range f.removeMeta {
		delete(md, k)
	}
	return api.ClusterRequest{HealthCheck: &spec, Metadata: md}, nil
}

// deleteFold deletes the keys of h equal to name ignoring case (header names).
func deleteFold(h map[string]string, name string) {
	for k := range h {
		if strings.EqualFold(k, name) {
			delete(h, k)
		}
	}
}

// specOf is the request spec that writes back the health check h as read. A MYSQL
// password reads as api.RedactedPassword, which a write keeps as it is stored.
func specOf(h api.HealthCheck) api.HealthCheckSpec {
	s := api.HealthCheckSpec{
		Type: h.Type, Port: h.Port, Path: h.Path, Headers: maps.Clone(h.Headers),
		ExpectedStatus: slices.Clone(h.ExpectedStatus), Rise: h.Rise, Fall: h.Fall, Confirm: h.Confirm,
		TLSServerName: h.TLSServerName, TLSSkipVerify: h.TLSSkipVerify, TLSCAPEM: h.TLSCAPEM,
		GRPCService: h.GRPCService, GRPCTLS: h.GRPCTLS, User: h.User, Password: h.Password, Query: h.Query,
	}
	if h.Interval > 0 {
		s.Interval = h.Interval.String()
	}
	if h.Timeout > 0 {
		s.Timeout = h.Timeout.String()
	}
	if h.DeregisterAfter > 0 {
		s.DeregisterAfter = h.DeregisterAfter.String()
	}
	return s
}

// hasPEMCertificate reports whether b holds at least one PEM CERTIFICATE block.
func hasPEMCertificate(b []byte) bool {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return false
		}
		if blk.Type == "CERTIFICATE" {
			return true
		}
	}
}

// showCluster prints the cluster as a table of its settings or, with -o json, as the
// API's api.ClusterResponse.
func (a *app) showCluster(cmd *cobra.Command, sc scope, service, cluster string) error {
	res, _, err := a.client().Cluster(ctxOf(cmd), sc.namespace, sc.group, service, cluster, client.QueryOptions{})
	if err != nil {
		return err
	}
	if a.output == outputJSON {
		return writeJSON(a.stdout, res)
	}
	c, h := res.Cluster, res.Cluster.HealthCheck
	t := newTable(a.stdout, "SETTING", "VALUE")
	t.row("namespace", c.Namespace)
	t.row("group", c.Group)
	t.row("service", c.Service)
	t.row("cluster", c.Name)
	t.row("check", strings.ToLower(h.Type))
	port := "each instance's own port"
	if h.Port != 0 {
		port = strconv.Itoa(h.Port)
	}
	t.row("port", port)
	if h.Type == api.CheckHTTP || h.Type == api.CheckHTTPS || h.Path != "" {
		t.row("path", orDash(h.Path))
		t.row("headers", formatMeta(h.Headers))
		codes := "any of 200..399"
		if len(h.ExpectedStatus) > 0 {
			parts := make([]string, len(h.ExpectedStatus))
			for i, s := range h.ExpectedStatus {
				parts[i] = strconv.Itoa(s)
			}
			codes = strings.Join(parts, ",")
		}
		t.row("expected-status", codes)
	}
	if h.Type == api.CheckGRPC {
		t.row("grpc-service", orDash(h.GRPCService))
		t.row("grpc-tls", strconv.FormatBool(h.GRPCTLS))
	}
	if h.Type == api.CheckHTTPS || h.Type == api.CheckTLS || h.GRPCTLS {
		name := h.TLSServerName
		if name == "" {
			name = "the instance's address"
		}
		t.row("tls-server-name", name)
		t.row("tls-skip-verify", strconv.FormatBool(h.TLSSkipVerify))
		cas := "the system roots"
		if h.TLSCAPEM != "" {
			cas = fmt.Sprintf("%d certificate(s) of the cluster", countPEMCertificates(h.TLSCAPEM))
		}
		t.row("tls-ca-bundle", cas)
	}
	if h.Type == api.CheckMySQL {
		t.row("user", h.User)
		pw := "none"
		if h.Password != "" {
			pw = "set (never shown)"
		}
		t.row("password", pw)
		t.row("query", h.Query)
	}
	t.row("interval", h.Interval.String())
	t.row("check-timeout", h.Timeout.String())
	t.row("rise", strconv.Itoa(h.Rise))
	t.row("fall", strconv.Itoa(h.Fall))
	t.row("confirm", orDash(h.Confirm))
	dereg := "never"
	if h.DeregisterAfter > 0 {
		dereg = h.DeregisterAfter.String()
	}
	t.row("deregister-after", dereg)
	t.row("metadata", formatMeta(c.Metadata))
	t.row("modify-index", strconv.FormatUint(c.ModifyIndex, 10))
	return t.flush()
}

// countPEMCertificates counts the CERTIFICATE blocks of a PEM bundle.
func countPEMCertificates(s string) int {
	n := 0
	for b := []byte(s); ; {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return n
		}
		if blk.Type == "CERTIFICATE" {
			n++
		}
	}
}

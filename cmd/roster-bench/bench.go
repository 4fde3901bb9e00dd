package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/bench"
	"github.com/rosterhq/roster/tlsutil"
)

// benchOptions holds the flags of `roster-bench`.
type benchOptions struct {
	system        string
	endpoints     []string
	token         string
	workloads     []string
	consistencies []string
	instances     []int
	concurrency   []int
	duration      time.Duration
	warmup        time.Duration
	services      int
	readRatio     float64
	pool          int
	registerLimit int
	writeTarget   string
	readTarget    string
	timeout       time.Duration
	healthChecks  bool
	watch         string
	cpuPids       []int
	label         string
	jsonPath      string
	quiet         bool
	tls           tlsutil.Files // --ca-file, --cert-file, --key-file
}

// newBenchCmd builds `roster-bench` (load generator) with its `compare`, `failover`,
// `failover-report` and `fanout` subcommands.
func newBenchCmd() *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "roster-bench",
		Short: "Closed-loop load generator for Roster and etcd",
		Long: "Measure a running cluster with closed-loop HTTP workloads over keep-alive connections.\n\n" +
			"Workloads: register (distinct instances across --services services), deregister (drains\n" +
			"the instances of those services, topping them up to --pool first), read (one service of\n" +
			"--instances instances, in each --consistency mode), mixed (--read-ratio reads of 10-instance\n" +
			"services, the rest updates), watch (--concurrency watchers, each on its own connection; latency\n" +
			"is the time from a write to every watcher seeing it). Roster's watchers use --watch-transport:\n" +
			"sse holds one text/event-stream response open per watcher (served from the node's local\n" +
			"state, so --consistency stale), blocking runs blocking queries (?index=N&wait=30s); etcd's\n" +
			"use its watch stream.\n\n" +
			"Systems: roster (native API) and etcd (v3 JSON gateway; linearizable → default range,\n" +
			"stale/leader → serializable range). Every point runs --warmup, then is measured for\n" +
			"--duration; the table (and --json) report requests/s, p50/p90/p99/max latency, errors and\n" +
			"the CPU used by --cpu-pids and by the bench itself, in cores.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.system, "system", bench.SystemRoster, "system under test: roster or etcd")
	f.StringSliceVar(&o.endpoints, "endpoints", []string{"127.0.0.1:8848"}, "HTTP addresses of every cluster member")
	f.StringSliceVar(&o.workloads, "workload", []string{bench.WorkloadRegister, bench.WorkloadRead},
		"workloads to run, in order: "+strings.Join(bench.Workloads(), ", "))
	f.StringSliceVar(&o.consistencies, "consistency", []string{bench.Linearizable}, "read modes for read, mixed and watch: linearizable, leader, stale")
	f.IntSliceVar(&o.instances, "instances", []int{10}, "instances in the service the read workload reads")
	f.IntSliceVar(&o.concurrency, "concurrency", []int{1, 16, 64, 256}, "closed-loop workers (watchers for watch), one point each")
	f.DurationVar(&o.duration, "duration", 5*time.Second, "measured time per point")
	f.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured time before each point")
	f.IntVar(&o.services, "services", 100, "services that register, deregister and mixed spread over")
	f.Float64Var(&o.readRatio, "read-ratio", 0.9, "share of reads in the mixed workload")
	f.IntVar(&o.pool, "pool", 2000, "minimum instances the deregister workload starts from")
	f.IntVar(&o.registerLimit, "register-limit", 0, "end the register workload after this many registrations, warm-up included (0: run for --duration)")
	f.StringVar(&o.writeTarget, "write-target", bench.TargetLeader, "where writes go: leader, or all (spread over every endpoint)")
	f.StringVar(&o.readTarget, "read-target", bench.TargetLeader, "where reads and watches go: leader, or all")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound on each request")
	f.StringVar(&o.token, "token", "", "ACL token secret presented with every Roster request (a cluster with ACLs needs one with write access to the namespace)")
	f.BoolVar(&o.healthChecks, "health-checks", false,
		"roster: keep the default TCP health check on the bench's services (by default their DEFAULT cluster gets type NONE:\n"+
			"the bench's instances have unreachable addresses, and etcd has no health checking)")
	f.StringVar(&o.watch, "watch-transport", bench.DefaultWatchTransport,
		"roster: how the watch workload's watchers follow the service: sse (event streams) or blocking (blocking queries)")
	f.IntSliceVar(&o.cpuPids, "cpu-pids", nil, "PIDs of the cluster's processes, whose CPU use is reported per point")
	f.StringVar(&o.label, "label", "", "tag stored in every result (for example the round)")
	f.StringVar(&o.jsonPath, "json", "", "write the JSON report to this file (- for stdout)")
	f.BoolVar(&o.quiet, "quiet", false, "do not print rows to stderr as points complete")
	f.StringVar(&o.tls.CAFile, "ca-file", "", "roster: CA certificate(s) (PEM) of a cluster serving HTTPS; endpoints without a scheme are then https")
	f.StringVar(&o.tls.CertFile, "cert-file", "", "roster: client certificate (PEM) for a cluster started with --tls-verify-incoming (with --key-file)")
	f.StringVar(&o.tls.KeyFile, "key-file", "", "roster: key of --cert-file (PEM)")
	cmd.AddCommand(newBenchCompareCmd(), newBenchFailoverCmd(), newBenchFailoverReportCmd(), newBenchFanoutCmd())
	return cmd
}

func runBench(cmd *cobra.Command, o *benchOptions) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	var progress io.Writer
	if !o.quiet {
		progress = cmd.ErrOrStderr()
	}
	var tlsCfg *tls.Config
	if !o.tls.IsZero() {
		var err error
		if tlsCfg, err = tlsutil.ClientConfig(o.tls); err != nil {
			return fmt.Errorf("--ca-file/--cert-file/--key-file: %w", err)
		}
	}
	cfg := bench.SuiteConfig{
		Client: bench.ClientConfig{
			System: o.system, Endpoints: o.endpoints, WriteTarget: o.writeTarget, ReadTarget: o.readTarget, Timeout: o.timeout,
			HealthChecks: o.healthChecks, WatchTransport: o.watch, Token: o.token,
		},
		Workloads:     o.workloads,
		Consistencies: o.consistencies,
		Instances:     o.instances,
		Concurrency:   o.concurrency,
		Warmup:        o.warmup,
		Duration:      o.duration,
		Services:      o.services,
		ReadRatio:     o.readRatio,
		Pool:          o.pool,
		RegisterLimit: o.registerLimit,
		CPUPids:       o.cpuPids,
		Label:         o.label,
		Logger:        slog.New(slog.DiscardHandler),
	}
	cfg.Client.TLS = tlsCfg
	rep := bench.Report{Meta: bench.NewMeta(os.Args)}
	rep.Meta.SystemVersion = bench.SystemVersion(ctx, o.system, o.endpoints[0])
	results, err := bench.RunSuite(ctx, cfg, progress)
	rep.Results = results
	if len(results) > 0 {
		fmt.Fprintln(cmd.OutOrStdout())
		if werr := bench.WriteTable(cmd.OutOrStdout(), results); werr != nil && err == nil {
			err = werr
		}
	}
	if o.jsonPath != "" {
		if werr := benchWriteJSONFile(cmd, o.jsonPath, rep); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// benchWriteJSONFile writes v as indented JSON to path ("-" = the command's stdout).
func benchWriteJSONFile(cmd *cobra.Command, path string, v any) error {
	var w io.Writer = cmd.OutOrStdout()
	if path != "-" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		w = f
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newBenchCompareCmd() *cobra.Command {
	var jsonPath string
	cmd := &cobra.Command{
		Use:   "compare REPORT.json...",
		Short: "Compare Roster and etcd reports: medians over rounds and Roster/etcd ratios per point",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var reps []bench.Report
			for _, p := range args {
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				rep, err := bench.ReadReport(f)
				_ = f.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				reps = append(reps, rep)
			}
			cmp := bench.Compare(reps)
			if err := bench.WriteComparison(cmd.OutOrStdout(), cmp); err != nil {
				return err
			}
			if jsonPath != "" {
				return benchWriteJSONFile(cmd, jsonPath, cmp)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&jsonPath, "json", "", "write the comparison (with every raw result) to this file")
	return cmd
}

// benchParsePids parses "endpoint=pid,endpoint=pid".
func benchParsePids(items []string) (map[string]int, error) {
	out := map[string]int{}
	for _, it := range items {
		ep, p, ok := strings.Cut(it, "=")
		if !ok {
			return nil, fmt.Errorf("--pids %q: want ENDPOINT=PID", it)
		}
		pid, err := strconv.Atoi(p)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("--pids %q: bad pid", it)
		}
		out[endpointKey(ep)] = pid
	}
	return out, nil
}

// endpointKey is the host:port of an endpoint given as host:port or as a URL, so that
// both forms of one endpoint match.
func endpointKey(ep string) string {
	if u, err := api.BaseURL(ep); err == nil {
		return u.Host
	}
	return ep
}

func newBenchFailoverCmd() *cobra.Command {
	var (
		cfg      bench.FailoverConfig
		pids     []string
		jsonPath string
	)
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "One failover trial: write load, SIGKILL the leader, time to the first write through a survivor",
		Long: "Runs --workers closed-loop writers over every endpoint for --load, sends SIGKILL to the\n" +
			"leader's process, then starts a new write through a survivor every --probe-every and\n" +
			"reports the seconds from the kill to the first of those writes that succeeds. The leader\n" +
			"is --leader/--kill-pid, or found by asking the cluster (roster: /v1/status/leader; etcd:\n" +
			"/v3/maintenance/status) and looked up in --pids. --json appends the trial as one JSON line.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if cfg.Leader == "" {
				m, err := benchParsePids(pids)
				if err != nil {
					return err
				}
				leader, err := benchFindLeader(ctx, cfg.System, cfg.Endpoints)
				if err != nil {
					return err
				}
				cfg.Leader = leader
				cfg.KillPID = m[endpointKey(leader)]
				if cfg.KillPID == 0 {
					return fmt.Errorf("leader %s has no entry in --pids", leader)
				}
			}
			res, err := bench.Failover(ctx, cfg)
			if res != nil && jsonPath != "" {
				if werr := benchAppendJSONLine(jsonPath, res); werr != nil && err == nil {
					err = werr
				}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: killed %s (pid %d); first write through %s after %.3fs (%d of %d probes failed first; %d writes before the kill)\n",
				res.System, res.Killed, res.PID, res.Survivor, res.Seconds, res.FailedAfterKill, res.Probes, res.LoadWrites)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.System, "system", bench.SystemRoster, "roster or etcd")
	f.StringSliceVar(&cfg.Endpoints, "endpoints", nil, "HTTP addresses of every member, the leader's included")
	f.StringVar(&cfg.Leader, "leader", "", "endpoint of the leader to kill (with --kill-pid)")
	f.IntVar(&cfg.KillPID, "kill-pid", 0, "PID of the leader's process")
	f.StringSliceVar(&pids, "pids", nil, "ENDPOINT=PID of every member, to find the leader's process when --leader is not given")
	f.IntVar(&cfg.Workers, "workers", 8, "concurrent writers")
	f.DurationVar(&cfg.Load, "load", time.Second, "write load before the kill")
	f.DurationVar(&cfg.ProbeEvery, "probe-every", 10*time.Millisecond, "interval between writes after the kill (the resolution)")
	f.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "bound on each write")
	f.DurationVar(&cfg.MaxWait, "max-wait", 60*time.Second, "give up when no write succeeded this long after the kill")
	f.BoolVar(&cfg.HealthChecks, "health-checks", false, "roster: keep the default TCP health check on the written services")
	f.StringVar(&jsonPath, "json", "", "append the trial as a JSON line to this file")
	return cmd
}

// benchHTTPClient is the client of the short status requests made outside the bench engine.
func benchHTTPClient() *http.Client { return &http.Client{Timeout: 5 * time.Second} }

// benchFindLeader asks the cluster for its leader's HTTP endpoint.
func benchFindLeader(ctx context.Context, system string, eps []string) (string, error) {
	hc := benchHTTPClient()
	switch system {
	case bench.SystemRoster:
		return bench.RosterLeader(ctx, hc, eps)
	case bench.SystemEtcd:
		return bench.EtcdLeader(ctx, hc, eps)
	default:
		return "", fmt.Errorf("--system %q: want roster or etcd", system)
	}
}

func benchAppendJSONLine(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func newBenchFailoverReportCmd() *cobra.Command {
	var jsonPath string
	cmd := &cobra.Command{
		Use:   "failover-report TRIALS.jsonl...",
		Short: "Median, min and max failover time per system from the lines `roster-bench failover --json` appended",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var trials []bench.FailoverResult
			for _, p := range args {
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				sc := bufio.NewScanner(f)
				for sc.Scan() {
					line := strings.TrimSpace(sc.Text())
					if line == "" {
						continue
					}
					var tr bench.FailoverResult
					if err := json.Unmarshal([]byte(line), &tr); err != nil {
						_ = f.Close()
						return fmt.Errorf("%s: %w", p, err)
					}
					trials = append(trials, tr)
				}
				_ = f.Close()
				if err := sc.Err(); err != nil {
					return err
				}
			}
			if len(trials) == 0 {
				return errors.New("no trials")
			}
			sums := bench.SummarizeFailover(trials)
			if err := bench.WriteFailoverTable(cmd.OutOrStdout(), sums); err != nil {
				return err
			}
			if jsonPath != "" {
				return benchWriteJSONFile(cmd, jsonPath, map[string]any{"summary": sums, "trials": trials})
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&jsonPath, "json", "", "write the summary and every trial to this file")
	return cmd
}

func newBenchFanoutCmd() *cobra.Command {
	var (
		cfg      bench.FanoutConfig
		jsonPath string
		quiet    bool
	)
	cmd := &cobra.Command{
		Use:   "fanout --endpoint URL [--others URL,URL] [--watchers 10000] [--writes 20] [--pid PID]",
		Short: "SSE fan-out: N subscribers on one node; their memory, delivery latency and the node's responsiveness",
		Long: "Opens --watchers SSE subscribers (one connection and one goroutine each) on --endpoint to the\n" +
			"instances of --service (--instances loopback instances, health check NONE), waits until each\n" +
			"has its first event, then makes --writes writes one at a time, each waiting until every\n" +
			"subscriber received it. It reports the RSS, open files and goroutines of the server (--pid)\n" +
			"and of itself before opening and when idle with every subscriber (growth per subscriber), the\n" +
			"latency from each write's ack (and from its issue) to each subscriber receiving it (p50, p90,\n" +
			"p99, max over every delivery), and, sampled every --probe-every by a side client through\n" +
			"every phase (baseline, open, idle, writes): the latency of GET /v1/status/ready and of a stale\n" +
			"read on --endpoint, the largest Raft last contact of every member (X-Roster-Last-Contact),\n" +
			"how often it exceeded --heartbeat-interval, and the CPU of the server and of the bench.\n" +
			"Writes go to the leader, found among --endpoint and --others. scripts/bench-watch-fanout.sh\n" +
			"starts a cluster and runs this.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if cfg.Endpoint == "" {
				return errors.New("--endpoint is required")
			}
			if !quiet {
				cfg.Progress = cmd.ErrOrStderr()
			}
			res, err := bench.Fanout(ctx, cfg)
			if res != nil {
				res.Meta = bench.NewMeta(os.Args)
				fmt.Fprintln(cmd.OutOrStdout())
				if werr := bench.WriteFanoutTable(cmd.OutOrStdout(), res); werr != nil && err == nil {
					err = werr
				}
				if jsonPath != "" {
					if werr := benchWriteJSONFile(cmd, jsonPath, res); werr != nil && err == nil {
						err = werr
					}
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Endpoint, "endpoint", "", "HTTP address of the node the subscribers connect to")
	f.StringSliceVar(&cfg.Others, "others", nil, "HTTP addresses of the other members (the leader among them takes the writes)")
	f.IntVar(&cfg.Watchers, "watchers", 10000, "SSE subscribers")
	f.IntVar(&cfg.Writes, "writes", 20, "writes, one at a time, each waited for by every subscriber")
	f.IntVar(&cfg.Instances, "instances", 10, "instances in the service followed")
	f.StringVar(&cfg.Service, "service", "bench-fanout", "service followed")
	f.IntVar(&cfg.PID, "pid", 0, "PID of the --endpoint server process (RSS, open files, CPU)")
	f.DurationVar(&cfg.Baseline, "baseline", 2*time.Second, "side-client sampling before the subscribers open")
	f.DurationVar(&cfg.Idle, "idle", 2*time.Second, "wait with every subscriber established before the idle RSS is taken")
	f.DurationVar(&cfg.WriteGap, "write-gap", 100*time.Millisecond, "pause between writes")
	f.DurationVar(&cfg.ProbeEvery, "probe-every", 10*time.Millisecond, "side-client period")
	f.IntVar(&cfg.OpenConcurrency, "open-concurrency", 64, "subscribers connecting at once")
	f.DurationVar(&cfg.OpenTimeout, "open-timeout", 5*time.Minute, "bound on the time until every subscriber has its first event")
	f.DurationVar(&cfg.WriteTimeout, "write-timeout", time.Minute, "bound on the wait for every subscriber to see a write")
	f.IntVar(&cfg.BufferSize, "buffer", 2048, "read buffer of each subscriber's connection, bytes")
	f.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", 50*time.Millisecond, "the leader's heartbeat interval, which last contacts are compared with")
	f.BoolVar(&cfg.Verify, "verify", false, "decode every event's JSON and check its index (costs the bench CPU)")
	f.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "bound on each setup request, write and side-client request")
	f.StringVar(&jsonPath, "json", "", "write the result as JSON to this file (- for stdout)")
	f.BoolVar(&quiet, "quiet", false, "do not print the phases to stderr")
	return cmd
}

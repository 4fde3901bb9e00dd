package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/demo"
)

// demoRetryPause is the pause between attempts of `demo-backend register` while the
// cluster has no leader or cannot be reached.
const demoRetryPause = 500 * time.Millisecond

// demoBackendCmd is `roster demo-backend`: a tiny HTTP server to register and probe
// (the compose demo profile runs it), with `register` to put it in the registry.
func (a *app) demoBackendCmd() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "demo-backend",
		Short: "Run a tiny HTTP backend to try Roster with (GET / and GET " + demo.HealthPath + ")",
		Long: "Run a tiny HTTP backend until interrupted: GET / answers a JSON hello, GET " + demo.HealthPath + "\n" +
			"answers 200 for an HTTP health check. It prints the address it listens on.",
		Example: "  roster demo-backend --addr :8080\n" +
			"  roster demo-backend register demo demo-backend:8080 --addr roster1:8848",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("demo backend: listen %s: %w", listen, err)
			}
			fmt.Fprintf(a.stdout, "demo backend listening on %s\n", ln.Addr())
			return demo.ServeListener(ctxOf(cmd), ln)
		},
	}
	cmd.Flags().StringVar(&listen, "addr", ":8080", "address to listen on")
	cmd.AddCommand(a.demoRegisterCmd())
	return cmd
}

// demoRegisterCmd is `roster demo-backend register SERVICE HOST:PORT`: it gives the
// service's cluster an HTTP check of the backend's health path, then registers the
// backend. It retries while the cluster has no leader or cannot be reached, up to --wait.
func (a *app) demoRegisterCmd() *cobra.Command {
	var (
		sc       scope
		cluster  string
		interval time.Duration
		wait     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "register SERVICE HOST:PORT",
		Short: "Register a demo backend, with an HTTP health check of " + demo.HealthPath,
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ip, port, err := parseInstanceAddr(args[1])
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctxOf(cmd), wait)
			defer cancel()
			c := a.client()
			spec := api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{
				Type:           api.CheckHTTP,
				Path:           demo.HealthPath,
				ExpectedStatus: []int{http.StatusOK},
				Interval:       interval.String(),
			}}
			if err := demoRetry(ctx, func(ctx context.Context) error {
				_, err := c.UpsertCluster(ctx, sc.namespace, sc.group, args[0], cluster, spec)
				return err
			}); err != nil {
				return fmt.Errorf("cluster %s of %s: %w", cluster, args[0], err)
			}
			var idx uint64
			req := api.InstanceRequest{Cluster: &cluster, Metadata: map[string]string{"app": "roster-demo"}}
			if err := demoRetry(ctx, func(ctx context.Context) error {
				var err error
				idx, err = c.RegisterInstance(ctx, sc.namespace, sc.group, args[0], ip, port, req)
				return err
			}); err != nil {
				return err
			}
			return a.printWrite(api.WriteResult{Index: idx}, "registered %s %s in %s/%s, cluster %s with an HTTP check of %s",
				args[0], api.JoinAddr(ip, port), sc.namespace, sc.group, cluster, demo.HealthPath)
		},
	}
	sc.flags(cmd)
	cmd.Flags().StringVar(&cluster, "cluster", api.DefaultCluster, "cluster of the instance")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "health check interval")
	cmd.Flags().DurationVar(&wait, "wait", 60*time.Second, "how long to retry while the cluster has no leader or is unreachable")
	a.clientFlags(cmd)
	return cmd
}

// demoRetry runs fn until it succeeds, fails with an answer other than "no leader" or
// "unavailable", or ctx is done.
func demoRetry(ctx context.Context, fn func(context.Context) error) error {
	for {
		err := fn(ctx)
		var apiErr *client.APIError
		if err == nil || (errors.As(err, &apiErr) && !client.IsNoLeader(err) && apiErr.Status != http.StatusServiceUnavailable) {
			return err
		}
		t := time.NewTimer(demoRetryPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-t.C:
		}
	}
}

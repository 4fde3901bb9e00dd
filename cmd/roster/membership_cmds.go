package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
)

// leaderPollInterval is how often `leader transfer` asks who leads while it waits for
// the new leader.
const leaderPollInterval = 50 * time.Millisecond

func (a *app) membersRemoveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a server from the cluster",
		Long: "Remove server ID from the Raft configuration and the member table (DELETE\n" +
			"/v1/cluster/members/{id}). Use it for a node that is gone for good: until it is removed\n" +
			"a dead voter still counts in the quorum. Removing the leader makes it step down. The\n" +
			"change runs on the leader; --addr may name any node.",
		Example: "  roster members remove n3 --addr 127.0.0.1:8848",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if strings.TrimSpace(id) == "" {
				return usagef("usage: %s: ID must not be empty", cmd.UseLine())
			}
			idx, err := a.client().RemoveMember(ctxOf(cmd), id)
			if err != nil {
				return err
			}
			return a.printWrite(api.WriteResult{Index: idx}, "removed member %s", safeText(id))
		},
	}
	a.clientFlags(cmd)
	return cmd
}

func (a *app) leaderTransferCmd() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "transfer [ID]",
		Short: "Hand leadership to server ID, or to any up-to-date voter",
		Long: "Ask the leader to hand leadership to voter ID, or without ID to any voter that is up to\n" +
			"date (POST /v1/cluster/leadership-transfer), for example before maintenance of the\n" +
			"leader's machine. It then waits up to --wait for the node at --addr to know the new\n" +
			"leader and prints it as `roster leader` does. Transferring to the server that leads\n" +
			"already changes nothing and exits 0.",
		Example: "  roster leader transfer n2\n  roster leader transfer -o json",
		Args:    maxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var id string
			if len(args) == 1 {
				if id = args[0]; strings.TrimSpace(id) == "" {
					return usagef("usage: %s: ID must not be empty", cmd.UseLine())
				}
			}
			if wait <= 0 {
				return usagef("--wait %s: must be positive", wait)
			}
			ctx := ctxOf(cmd)
			c := a.client()
			old, err := c.Leader(ctx)
			if err != nil {
				return err
			}
			if id != "" && id == old.ID {
				fmt.Fprintf(a.stderr, "%s leads already: nothing to transfer\n", safeText(id))
				return a.printLeader(old)
			}
			ms, _, err := c.Members(ctx, client.QueryOptions{})
			if err != nil {
				return err
			}
			if err := transferTarget(ms.Members, old.ID, id); err != nil {
				return err
			}
			if err := c.TransferLeadership(ctx, id); err != nil {
				return err
			}
			l, err := awaitNewLeader(ctx, c, old.ID, wait)
			if err != nil {
				return err
			}
			if id != "" && l.ID != id {
				fmt.Fprintf(a.stderr, "note: %s was asked to lead, but %s leads now (it was elected meanwhile)\n", safeText(id), safeText(l.ID))
			}
			return a.printLeader(l)
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Second, "how long to wait for the new leader to be known")
	a.clientFlags(cmd)
	return cmd
}

// transferTarget checks that members have a voter other than the leader to hand
// leadership to: id when given, else any.
func transferTarget(members []api.Member, leader, id string) error {
	for _, m := range members {
		switch {
		case id != "" && m.ID == id && !m.Voter:
			return fmt.Errorf("%s is not a voter: only a voter can lead (roster members shows who votes)", safeText(id))
		case id != "" && m.ID == id:
			return nil
		case id == "" && m.ID != leader && m.Voter:
			return nil
		}
	}
	if id != "" {
		return fmt.Errorf("%s is not a member of the cluster (roster members lists them)", safeText(id))
	}
	return fmt.Errorf("the cluster has no voter but the leader %s to hand leadership to", safeText(leader))
}

// awaitNewLeader asks c who leads until the answer is a leader other than old, for at
// most wait.
func awaitNewLeader(ctx context.Context, c *client.Client, old string, wait time.Duration) (api.Leader, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(leaderPollInterval)
	defer tick.Stop()
	for {
		l, err := c.Leader(ctx)
		if err == nil && l.ID != old {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return api.Leader{}, fmt.Errorf("leadership left %s, but the node at %s knew no new leader within %s", safeText(old), c.Addr(), wait)
		case <-tick.C:
		}
	}
}

func (a *app) joinCmd() *cobra.Command {
	var (
		id, raftAddr string
		nonVoter     bool
	)
	cmd := &cobra.Command{
		Use:   "join HTTP_ADDR --id ID --raft-addr HOST:PORT",
		Short: "Ask the cluster to add a running server",
		Long: "Ask the cluster reachable at --addr to add the server whose API is at HTTP_ADDR, with Raft\n" +
			"server id --id and Raft address --raft-addr (POST /v1/cluster/join; the leader runs it).\n" +
			"The server must be running already: started with neither --peers nor --join it waits,\n" +
			"without a cluster, until it is added. It joins without a vote, receives the log and\n" +
			"gets a vote once it has caught up and stayed in contact (roster members shows when);\n" +
			"if leadership moves before that, run the same command again (a repeated join only asks\n" +
			"for the vote again). --non-voter keeps it without a vote.\n\n" +
			"Roster nodes do not publish their own id and Raft address, so both are given here: the\n" +
			"server's --node-id and --raft-advertise. (A server started with `roster server --join`\n" +
			"sends this request itself.)",
		Example: "  roster join 127.0.0.4:8848 --id n4 --raft-addr 127.0.0.4:7848 --addr 127.0.0.1:8848\n" +
			"  roster join https://127.0.0.5:8848 --id n5 --raft-addr 127.0.0.5:7848 --non-voter",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			httpAddr := args[0]
			if strings.TrimSpace(id) == "" {
				return usagef("--id is required (or %s): the server's --node-id", envName("id"))
			}
			if raftAddr == "" {
				return usagef("--raft-addr is required (or %s): the server's --raft-advertise address", envName("raft-addr"))
			}
			if err := dialableHostPort(raftAddr); err != nil {
				return usagef("--raft-addr %q: %v", raftAddr, err)
			}
			rest := httpAddr
			for _, scheme := range []string{"http://", "https://"} {
				rest = strings.TrimPrefix(rest, scheme)
			}
			if err := dialableHostPort(rest); err != nil {
				return usagef("HTTP_ADDR %q: %v (or an http:// or https:// URL of it)", httpAddr, err)
			}
			req := api.JoinRequest{ID: id, RaftAddr: raftAddr, HTTPAddr: httpAddr, NonVoter: nonVoter}
			idx, err := a.client().Join(ctxOf(cmd), req)
			if err != nil {
				return err
			}
			how := "without a vote until it has caught up (see roster members)"
			if nonVoter {
				how = "as a non-voter"
			}
			return a.printWrite(api.WriteResult{Index: idx}, "asked the cluster to add %s (raft %s, http %s) %s",
				safeText(id), safeText(raftAddr), safeText(httpAddr), how)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&id, "id", "", "Raft server id of the server to add: its --node-id (required)")
	fs.StringVar(&raftAddr, "raft-addr", "", "Raft address the other servers dial, host:port: its --raft-advertise (required)")
	fs.BoolVar(&nonVoter, "non-voter", false, "keep the server without a vote (a read replica)")
	a.clientFlags(cmd)
	return cmd
}

// dialableHostPort checks that addr is host:port with a host another machine can dial
// (not empty, not 0.0.0.0 or ::) and a port in 1..65535.
func dialableHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port must be 1..65535")
	}
	if host == "" {
		return fmt.Errorf("want a host other servers can dial, not only a port")
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		return fmt.Errorf("%s is not an address other servers can dial", host)
	}
	return nil
}

// maxArgs is cobra.MaximumNArgs with a usage error.
func maxArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usagef("usage: %s (got %d argument(s), want at most %d)", cmd.UseLine(), len(args), n)
		}
		return nil
	}
}

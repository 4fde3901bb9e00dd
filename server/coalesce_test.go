package server_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// Concurrent writes through every node are coalesced into batch entries on the leader:
// each is answered once, with its own outcome (a deregistration of an instance that does
// not exist fails alone with 404 inside a batch of successful registrations), and every
// acknowledged registration is on every node. Without coalescing no entry carries more
// than one write (the metric's sum equals its count).
func TestCoalescing_ConcurrentWritesShareEntries(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("coalescing=%v", on), func(t *testing.T) {
			c := servertest.New(t, 3, func(cfg *server.Config) { cfg.NoWriteCoalescing = !on })
			leader := c.MustLeader()
			ctx := ctxT(t, 60*time.Second)
			const writers, each = 32, 15
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				maxIdx  uint64
				errs    []error
				missing int
			)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cl := c.Nodes[w%len(c.Nodes)].Client()
					for i := range each {
						idx, err := cl.RegisterInstance(ctx, "", "", "orders", fmt.Sprintf("127.101.%d.%d", w, i), 8080, api.InstanceRequest{})
						_, derr := cl.DeregisterInstance(ctx, "", "", "orders", fmt.Sprintf("127.102.%d.%d", w, i), 8080)
						mu.Lock()
						maxIdx = max(maxIdx, idx)
						if err != nil {
							errs = append(errs, err)
						}
						var ae *client.APIError
						if errors.As(derr, &ae) && ae.Status == 404 {
							missing++
						} else {
							errs = append(errs, fmt.Errorf("deregistering a missing instance: %v, want 404", derr))
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("%d writes failed, first: %v", len(errs), errs[0])
			}
			if missing != writers*each {
				t.Fatalf("%d deregistrations answered 404, want %d", missing, writers*each)
			}
			if err := c.WaitApplied(ctx, maxIdx); err != nil {
				t.Fatal(err)
			}
			for i, nd := range c.Nodes {
				resp, _, err := nd.Client().Instances(ctx, "", "", "orders", client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: api.ConsistencyStale}})
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Instances) != writers*each {
					t.Fatalf("node %d holds %d instances, want %d", i, len(resp.Instances), writers*each)
				}
			}
			m := scrape(ctx, t, c.Nodes[leader])
			count, sum := m["roster_registry_entry_commands_count"], m["roster_registry_entry_commands_sum"]
			t.Logf("leader proposed %.0f entries for %.0f writes", count, sum)
			if on && sum <= count {
				t.Fatalf("%.0f writes in %.0f entries: no write was coalesced", sum, count)
			}
			if !on && count != 0 {
				t.Fatalf("without coalescing the registry proposed %.0f entries through the coalescer", count)
			}
		})
	}
}

package raftnode

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
)

// Concurrent linearizable reads share leadership confirmations: far fewer rounds than
// reads, every read succeeds, and a read that starts after a write was acknowledged
// sees it (it waits for a round that began after it, then for the apply).
func TestNode_ConcurrentLinearizableReadsShareConfirmations(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	n := leader.N()
	const readers, each = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, readers*each)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if r == 0 && i%5 == 0 {
					id := "ns" + string(rune('a'+i))
					if _, err := n.Apply(ctxTimeout(t, 5*time.Second), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: id}}); err != nil {
						errs <- err
						continue
					}
					if err := n.ConsistentRead(ctxTimeout(t, 5*time.Second)); err != nil {
						errs <- err
						continue
					}
					if !hasNamespace(leader, id) {
						t.Errorf("a linearizable read after the write of %s does not see it", id)
					}
					continue
				}
				if err := n.ConsistentRead(ctxTimeout(t, 5*time.Second)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("linearizable read failed: %v", err)
	}
	reads, rounds := testutil.ToFloat64(n.met.readsJoined), testutil.ToFloat64(n.met.readRounds)
	t.Logf("%.0f linearizable reads, %.0f leadership confirmations", reads, rounds)
	if reads != readers*each {
		t.Fatalf("%.0f reads counted, want %d", reads, readers*each)
	}
	if rounds >= reads/2 {
		t.Fatalf("%.0f confirmations for %.0f concurrent reads: reads do not share them", rounds, reads)
	}
}

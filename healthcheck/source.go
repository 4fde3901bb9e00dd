package healthcheck

import (
	"context"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// Source is the committed state the prober follows (*store.Store implements it).
type Source interface {
	// ForEachInstanceHealth calls fn for every instance with its cluster's health-check
	// spec (shared by the cluster's instances, not to be modified), from one consistent
	// view, until fn returns false. fn must not call the Source.
	ForEachInstanceHealth(fn func(ih store.InstanceHealth, hc *model.HealthCheck) bool) error
	// Subscribe returns the events of each commit, in commit order, and a function
	// that ends the subscription. After dropped events the feed delivers EventReset.
	Subscribe(buffer int) (<-chan []store.Event, func())
}

// Applier submits a command through Raft (*raftnode.Node implements it). It returns
// the index of the applied entry, or an error when the command was not committed or
// the state machine refused it.
type Applier interface {
	Apply(ctx context.Context, cmd fsm.Command) (uint64, error)
}

// ClusterSource is an optional extension of Source (*store.Store implements it): the
// prober uses it to learn the spec of a cluster it has not seen yet when an instance
// is registered into it. Without it such a cluster is assumed to have the spec of an
// implicitly created cluster (model.DefaultHealthCheck) until its next change event.
type ClusterSource interface {
	Cluster(ws *store.WatchSet, key model.ServiceKey, name string) (uint64, model.Cluster, error)
}

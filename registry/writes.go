package registry

import (
	"context"
	"errors"
	"time"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
)

// Condition makes a write conditional on the modify index of the object it writes.
// The zero Condition is unconditional.
type Condition struct {
	set       bool
	onService bool
	index     uint64
}

// IfIndex makes a write apply only if the object's modify index is index; IfIndex(0)
// means only if the object does not exist. A write whose condition does not hold is
// refused with a *model.CASError (errors.Is model.ErrCASMismatch) carrying the current
// index; the condition is evaluated inside the state machine's transaction.
func IfIndex(index uint64) Condition { return Condition{set: true, index: index} }

// IfServiceIndex makes a write apply only if the modify index of the service it writes
// into is index (0: only if the service does not exist). Every change to the service,
// its clusters and its instances raises that index, so a read-modify-write of anything
// inside a service conditions on the index the read returned.
func IfServiceIndex(index uint64) Condition {
	return Condition{set: true, onService: true, index: index}
}

// IfAbsent is IfIndex(0).
func IfAbsent() Condition { return IfIndex(0) }

// IsSet reports whether the condition is set.
func (c Condition) IsSet() bool { return c.set }

// Index is the expected modify index of a set condition.
func (c Condition) Index() uint64 { return c.index }

// Admission: a write that creates or replaces something is checked with the model's
// Admit* rules, the stricter set that grows over time; the state machine applies entries
// under the Validate* rules only, which never get stricter (model/admit.go says why).
// Deletes, health changes and the instance a patch names are checked with the Validate*
// rules, so that what an older version stored can still be removed.

// write is a user's write: forwarded to the leader (cmd, made conditional on cond) when
// this node does not lead, else admitted and applied here by local. A local attempt
// refused because this node does not lead (leadership moved before the entry was
// appended, or this node is stopping and hands leadership over: nothing was written) is
// forwarded to the next leader, another server.
func (r *Registry) write(ctx context.Context, cmd fsm.Command, cond Condition, local func() (uint64, error)) (uint64, error) {
	send := func(ctx context.Context) (uint64, bool, error) {
		if c, ok := cmd.(fsm.Conditional); ok {
			return r.forwardWrite(ctx, c, cond)
		}
		return r.forward(ctx, cmd)
	}
	if idx, ok, err := send(ctx); ok {
		return idx, err
	}
	idx, err := local()
	if errors.Is(err, ErrNotLeader) && r.peer != nil && ctx.Value(forwardedKey{}) == nil {
		r.fwdMet.moved.Inc()
		if idx, ok, err := send(context.WithValue(ctx, refusedHereKey{}, true)); ok {
			return idx, err
		}
	}
	return idx, err
}

// apply submits cmd through Raft within the request timeout, wrapped in a CAS command
// when cond is set. It is the only path from a user request to the Raft log.
func (r *Registry) apply(ctx context.Context, cmd fsm.Conditional, cond Condition) (uint64, error) {
	c, err := conditional(cmd, cond)
	if err != nil {
		return 0, err
	}
	return r.submit(ctx, c)
}

func (r *Registry) submit(ctx context.Context, cmd fsm.Command) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if r.coalesce != nil {
		return r.coalesce.submit(ctx, cmd)
	}
	return r.raft.Apply(ctx, cmd)
}

// RegisterInstance registers in, or replaces its cluster, weight, enabled flag and
// metadata (health counts only at the first registration).
func (r *Registry) RegisterInstance(ctx context.Context, in model.Instance, cond Condition) (uint64, error) {
	return r.write(ctx, fsm.RegisterInstanceRequest{Instance: in}, cond, func() (uint64, error) {
		if err := r.Authorize(ctx, acl.NamespacePermission(in.Namespace, acl.Write)); err != nil {
			return 0, err
		}
		if err := r.Limits().AdmitInstance(in); err != nil {
			return 0, err
		}
		key := model.ServiceKey{Namespace: in.Namespace, Group: in.Group, Service: in.Service}
		return r.admitConfusable(key, func() (uint64, error) {
			return r.apply(ctx, fsm.RegisterInstanceRequest{Instance: in}, cond)
		})
	})
}

// UpdateInstance changes the patch's fields of an existing instance.
func (r *Registry) UpdateInstance(ctx context.Context, ref model.InstanceRef, p model.InstancePatch, cond Condition) (uint64, error) {
	return r.write(ctx, fsm.UpdateInstanceRequest{Ref: ref, Patch: p}, cond, func() (uint64, error) {
		if err := r.Authorize(ctx, acl.NamespacePermission(ref.Namespace, acl.Write)); err != nil {
			return 0, err
		}
		if err := model.ValidateInstanceRef(ref); err != nil {
			return 0, err
		}
		if err := r.Limits().AdmitPatch(p); err != nil {
			return 0, err
		}
		return r.apply(ctx, fsm.UpdateInstanceRequest{Ref: ref, Patch: p}, cond)
	})
}

// DeregisterInstance removes an instance (model.ErrNotFound if there is none).
func (r *Registry) DeregisterInstance(ctx context.Context, ref model.InstanceRef, cond Condition) (uint64, error) {
	return r.write(ctx, fsm.DeregisterInstanceRequest{Ref: ref}, cond, func() (uint64, error) {
		if err := r.Authorize(ctx, acl.NamespacePermission(ref.Namespace, acl.Write)); err != nil {
			return 0, err
		}
		if err := model.ValidateInstanceRef(ref); err != nil {
			return 0, err
		}
		return r.apply(ctx, fsm.DeregisterInstanceRequest{Ref: ref}, cond)
	})
}

// SetInstanceHealth sets an instance's health by hand; refused with model.ErrConflict
// when its cluster is probed.
func (r *Registry) SetInstanceHealth(ctx context.Context, ref model.InstanceRef, healthy bool) (uint64, error) {
	// Forwarded without the time: the leader's clock stamps it.
	return r.write(ctx, fsm.SetHealthManualRequest{Ref: ref, Healthy: healthy}, Condition{}, func() (uint64, error) {
		if err := r.Authorize(ctx, acl.NamespacePermission(ref.Namespace, acl.Write)); err != nil {
			return 0, err
		}
		if err := model.ValidateInstanceRef(ref); err != nil {
			return 0, err
		}
		// The time is this node's (the leader's) clock: an instance made unhealthy records it.
		return r.submit(ctx, fsm.SetHealthManualAtRequest{Ref: ref, Healthy: healthy, At: time.Now().UnixMilli()})
	})
}

// UpsertService creates a service or replaces its definition (protect threshold,
// metadata); its clusters and instances are kept.
func (r *Registry) UpsertService(ctx context.Context, svc model.Service, cond Condition) (uint64, error) {
	return r.write(ctx, fsm.UpsertServiceRequest{Service: svc}, cond, func() (uint64, error) {
		if err := r.Authorize(ctx, acl.NamespacePermission(svc.Namespace, acl.Write)); err != nil {
			return 0, err
		}
		if err := r.Limits().AdmitService(svc); err != nil {
			return 0, err
		}
		return r.admitConfusable(svc.Key(), func() (uint64, error) {
			return r.apply(ctx, fsm.UpsertServiceRequest{Service: svc}, cond)
		})
	})
}

// DeleteService removes a service that has no instances.
func (r *Registry) DeleteService(ctx context.Context, key model.ServiceKey, cond Condition) (uint64, error) {
	return r.write(ctx, fsm.DeleteServiceRequest{Key: key}, cond, func() (uint64, error) {
		if err := r.Authorize(ctx, acl.NamespacePermission(key.Namespace, acl.Write)); err != nil {
			return 0, err
		}
		if err := model.ValidateServiceKey(key); err != nil {
			return 0, err
		}
		return r.apply(ctx, fsm.DeleteServiceRequest{Key: key}, cond)
	})
}

// UpsertCluster creates a cluster or replaces its health-check spec and metadata.
//
// A health check's password is a credential: a write whose spec carries one, or that
// replaces a spec carrying one, needs operator write besides the namespace's write. A
// password of model.RedactedPassword (what reads show) keeps the stored password, so
// that a client may write back the spec it read.
func (r *Registry) UpsertCluster(ctx context.Context, c model.Cluster, cond Condition) (uint64, error) {
	return r.write(ctx, fsm.UpsertClusterRequest{Cluster: c}, cond, func() (uint64, error) {
		if err := r.Authorize(ctx, acl.NamespacePermission(c.Namespace, acl.Write)); err != nil {
			return 0, err
		}
		stored, err := r.storedPassword(c)
		if err != nil {
			return 0, err
		}
		if c.HealthCheck.Password == model.RedactedPassword {
			if stored == "" {
				return 0, model.Invalid("healthCheck.password", "%q keeps the stored password, but the cluster has none", model.RedactedPassword)
			}
			c.HealthCheck.Password = stored
		}
		if c.HealthCheck.Password != "" || stored != "" {
			if err := r.Authorize(ctx, acl.OperatorWrite); err != nil {
				return 0, err
			}
		}
		if err := r.Limits().AdmitCluster(c); err != nil {
			return 0, err
		}
		key := model.ServiceKey{Namespace: c.Namespace, Group: c.Group, Service: c.Service}
		return r.admitConfusable(key, func() (uint64, error) {
			return r.apply(ctx, fsm.UpsertClusterRequest{Cluster: c}, cond)
		})
	})
}

// storedPassword returns the health-check password of the stored cluster c names
// ("" when there is none, or no such cluster).
func (r *Registry) storedPassword(c model.Cluster) (string, error) {
	if r.clusters == nil {
		return "", nil
	}
	key := model.ServiceKey{Namespace: c.Namespace, Group: c.Group, Service: c.Service}
	_, old, err := r.clusters.Cluster(nil, key, c.Name)
	if errors.Is(err, model.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return old.HealthCheck.Password, nil
}

// UpsertNamespace creates a namespace or replaces its name and description.
func (r *Registry) UpsertNamespace(ctx context.Context, ns model.Namespace) (uint64, error) {
	return r.write(ctx, fsm.UpsertNamespaceRequest{Namespace: ns}, Condition{}, func() (uint64, error) {
		if err := r.Authorize(ctx, acl.OperatorWrite); err != nil {
			return 0, err
		}
		if err := model.AdmitNamespaceRecord(ns); err != nil {
			return 0, err
		}
		return r.submit(ctx, fsm.UpsertNamespaceRequest{Namespace: ns})
	})
}

// DeleteNamespace removes a namespace that has no services.
func (r *Registry) DeleteNamespace(ctx context.Context, id string) (uint64, error) {
	return r.write(ctx, fsm.DeleteNamespaceRequest{ID: id}, Condition{}, func() (uint64, error) {
		if err := r.Authorize(ctx, acl.OperatorWrite); err != nil {
			return 0, err
		}
		if err := model.ValidateNamespace(id); err != nil {
			return 0, err
		}
		return r.submit(ctx, fsm.DeleteNamespaceRequest{ID: id})
	})
}

// UpdateSettings replaces the cluster-wide settings.
func (r *Registry) UpdateSettings(ctx context.Context, s model.Settings) (uint64, error) {
	return r.write(ctx, fsm.UpdateSettingsRequest{Settings: s}, Condition{}, func() (uint64, error) {
		if err := r.Authorize(ctx, acl.OperatorWrite); err != nil {
			return 0, err
		}
		if err := model.ValidateSettings(s); err != nil {
			return 0, err
		}
		return r.submit(ctx, fsm.UpdateSettingsRequest{Settings: s})
	})
}

package fsm

import (
	"fmt"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// How each command applies to the batch's transaction. The store's refusals are
// returned as errors; a payload that cannot be decoded never gets here (see decoder).

func (c RegisterInstanceRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.RegisterInstance(idx, c.Instance)
}

func (c DeregisterInstanceRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.DeregisterInstance(idx, c.Ref)
}

func (c UpdateInstanceRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.UpdateInstance(idx, c.Ref, c.Patch)
}

func (c UpsertServiceRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.UpsertService(idx, c.Service)
}

func (c DeleteServiceRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.DeleteService(idx, c.Key)
}

func (c UpsertClusterRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.UpsertCluster(idx, c.Cluster)
}

func (c UpsertNamespaceRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.UpsertNamespace(idx, c.Namespace)
}

func (c DeleteNamespaceRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.DeleteNamespace(idx, c.ID)
}

func (c SetHealthRequest) apply(f *FSM, tx *store.Txn, idx uint64) error {
	n, err := tx.SetHealth(idx, c.Updates)
	if err == nil && n < len(c.Updates) {
		f.logger.Debug("stale health updates dropped", "index", idx, "applied", n, "received", len(c.Updates))
	}
	return err
}

func (c SetHealthManualRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.SetHealthManual(idx, c.Ref, c.Healthy)
}

func (c SetHealthAtRequest) apply(f *FSM, tx *store.Txn, idx uint64) error {
	if c.At <= 0 {
		return model.Invalid("at", "must be a positive Unix time in milliseconds, got %d", c.At)
	}
	n, err := tx.SetHealthAt(idx, c.Updates, c.At)
	if err == nil && n < len(c.Updates) {
		f.logger.Debug("stale health updates dropped", "index", idx, "applied", n, "received", len(c.Updates))
	}
	return err
}

func (c SetHealthManualAtRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	if c.At <= 0 {
		return model.Invalid("at", "must be a positive Unix time in milliseconds, got %d", c.At)
	}
	return tx.SetHealthManualAt(idx, c.Ref, c.Healthy, c.At)
}

func (c AutoDeregisterRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.AutoDeregister(idx, c.Instance)
}

func (c UpsertMemberRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.UpsertMember(idx, c.Member)
}

func (c RemoveMemberRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.RemoveMember(idx, c.ID)
}

func (c UpdateSettingsRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.UpdateSettings(idx, c.Settings)
}

func (c SetClusterIDRequest) apply(_ *FSM, tx *store.Txn, _ uint64) error {
	return tx.SetClusterID(c.ID)
}

func (c ACLBootstrapRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.ACLBootstrap(idx, c.Token)
}

func (c CreateTokenRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.CreateToken(idx, c.Token)
}

func (c DeleteTokenRequest) apply(_ *FSM, tx *store.Txn, idx uint64) error {
	return tx.DeleteToken(idx, c.AccessorID)
}

// apply is reached only for a batch inside a batch (ApplyBatch applies a batch entry
// through applyBatch): the leader never writes one, and it is refused.
func (c BatchRequest) apply(_ *FSM, _ *store.Txn, _ uint64) error {
	return model.Invalid("commands", "a batch cannot contain a batch")
}

// apply hashes the state as of this entry: the transaction holds the batch's earlier
// entries and none of its later ones. The hash is the node's own record, not state.
func (c CheckStateRequest) apply(f *FSM, tx *store.Txn, idx uint64) error {
	sum, err := tx.StateHash(idx)
	if err != nil {
		return err
	}
	f.recordCheck(idx, sum)
	return nil
}

// apply changes nothing: the check a log checkpoint asks for is the log store's
// (raftnode), and the state is the same with or without it.
func (LogCheckpointRequest) apply(*FSM, *store.Txn, uint64) error { return nil }

// decodedCAS is a CASRequest with the command it wraps decoded (nil: a wrapped type that
// cannot be conditional).
type decodedCAS struct {
	CASRequest
	inner Conditional
}

// decodeCAS decodes the command c wraps. A wrapped type newer than this build halts, as
// the same command outside a CAS would; a type that cannot be conditional (or is itself
// a CAS) is kept for apply to refuse: no such entry is ever written.
func (f *FSM) decodeCAS(idx uint64, c CASRequest) (Command, error) {
	d := decodedCAS{CASRequest: c}
	dec, ok := f.decoders[c.Type]
	switch {
	case c.Type == CASType:
	case !ok && c.Type&^IgnoreUnknownFlag > f.newest:
		return nil, &Halt{Index: idx, Type: c.Type, Reason: HaltNeedsUpgrade}
	case ok:
		inner, err := dec(c.Type, idx, c.Payload)
		if err != nil {
			return nil, err
		}
		d.inner, _ = inner.(Conditional)
	}
	return d, nil
}

// apply checks the modify index of the object the wrapped command writes and applies it
// only if the index is the expected one.
func (c decodedCAS) apply(f *FSM, tx *store.Txn, idx uint64) error {
	if c.inner == nil {
		return model.Invalid("cas", "command type %s cannot be conditional", c.Type)
	}
	what, cur, err := c.inner.target(tx)
	if c.OnService {
		what, cur, err = serviceTarget(tx, c.inner.service())
	}
	if err != nil {
		return err
	}
	if cur != c.Index {
		return &model.CASError{What: what, Expected: c.Index, Current: cur}
	}
	return c.inner.apply(f, tx, idx)
}

// apply is reached only through decodedCAS (decodeAll decodes every CAS so).
func (c CASRequest) apply(f *FSM, tx *store.Txn, idx uint64) error {
	d, err := f.decodeCAS(idx, c)
	if err != nil {
		return err
	}
	return d.apply(f, tx, idx)
}

// Targets of the conditional commands.

func (c RegisterInstanceRequest) target(tx *store.Txn) (string, uint64, error) {
	return instanceTarget(tx, c.Instance.Ref())
}

func (c UpdateInstanceRequest) target(tx *store.Txn) (string, uint64, error) {
	return instanceTarget(tx, c.Ref)
}

func (c DeregisterInstanceRequest) target(tx *store.Txn) (string, uint64, error) {
	return instanceTarget(tx, c.Ref)
}

func (c UpsertServiceRequest) target(tx *store.Txn) (string, uint64, error) {
	return serviceTarget(tx, c.Service.Key())
}

func (c DeleteServiceRequest) target(tx *store.Txn) (string, uint64, error) {
	return serviceTarget(tx, c.Key)
}

func (c UpsertClusterRequest) target(tx *store.Txn) (string, uint64, error) {
	key := model.ServiceKey{Namespace: c.Cluster.Namespace, Group: c.Cluster.Group, Service: c.Cluster.Service}
	i, err := tx.ClusterIndex(key, c.Cluster.Name)
	return fmt.Sprintf("cluster %s of service %s", c.Cluster.Name, key), i, err
}

func (c RegisterInstanceRequest) service() model.ServiceKey   { return c.Instance.ServiceKey() }
func (c UpdateInstanceRequest) service() model.ServiceKey     { return c.Ref.ServiceKey() }
func (c DeregisterInstanceRequest) service() model.ServiceKey { return c.Ref.ServiceKey() }
func (c UpsertServiceRequest) service() model.ServiceKey      { return c.Service.Key() }
func (c DeleteServiceRequest) service() model.ServiceKey      { return c.Key }
func (c UpsertClusterRequest) service() model.ServiceKey {
	return model.ServiceKey{Namespace: c.Cluster.Namespace, Group: c.Cluster.Group, Service: c.Cluster.Service}
}

func instanceTarget(tx *store.Txn, ref model.InstanceRef) (string, uint64, error) {
	i, err := tx.InstanceIndex(ref)
	return fmt.Sprintf("instance %s of service %s", model.JoinAddr(ref.IP, ref.Port), ref.ServiceKey()), i, err
}

func serviceTarget(tx *store.Txn, key model.ServiceKey) (string, uint64, error) {
	i, err := tx.ServiceIndex(key)
	return "service " + key.String(), i, err
}

package fsm

import "github.com/rosterhq/roster/store"

// The handlers below decode one command type and apply it to the batch's transaction.
// A payload that cannot be decoded panics (see ApplyBatch); the store's refusals are
// returned as errors.

func (f *FSM) applyRegisterInstance(tx *store.Txn, idx uint64, payload []byte) error {
	var req RegisterInstanceRequest
	f.mustDecode(RegisterInstanceType, idx, payload, &req)
	return tx.RegisterInstance(idx, req.Instance)
}

func (f *FSM) applyDeregisterInstance(tx *store.Txn, idx uint64, payload []byte) error {
	var req DeregisterInstanceRequest
	f.mustDecode(DeregisterInstanceType, idx, payload, &req)
	return tx.DeregisterInstance(idx, req.Ref)
}

func (f *FSM) applyUpdateInstance(tx *store.Txn, idx uint64, payload []byte) error {
	var req UpdateInstanceRequest
	f.mustDecode(UpdateInstanceType, idx, payload, &req)
	return tx.UpdateInstance(idx, req.Ref, req.Patch)
}

func (f *FSM) applyUpsertService(tx *store.Txn, idx uint64, payload []byte) error {
	var req UpsertServiceRequest
	f.mustDecode(UpsertServiceType, idx, payload, &req)
	return tx.UpsertService(idx, req.Service)
}

func (f *FSM) applyDeleteService(tx *store.Txn, idx uint64, payload []byte) error {
	var req DeleteServiceRequest
	f.mustDecode(DeleteServiceType, idx, payload, &req)
	return tx.DeleteService(idx, req.Key)
}

func (f *FSM) applyUpsertCluster(tx *store.Txn, idx uint64, payload []byte) error {
	var req UpsertClusterRequest
	f.mustDecode(UpsertClusterType, idx, payload, &req)
	return tx.UpsertCluster(idx, req.Cluster)
}

func (f *FSM) applyUpsertNamespace(tx *store.Txn, idx uint64, payload []byte) error {
	var req UpsertNamespaceRequest
	f.mustDecode(UpsertNamespaceType, idx, payload, &req)
	return tx.UpsertNamespace(idx, req.Namespace)
}

func (f *FSM) applyDeleteNamespace(tx *store.Txn, idx uint64, payload []byte) error {
	var req DeleteNamespaceRequest
	f.mustDecode(DeleteNamespaceType, idx, payload, &req)
	return tx.DeleteNamespace(idx, req.ID)
}

func (f *FSM) applySetHealth(tx *store.Txn, idx uint64, payload []byte) error {
	var req SetHealthRequest
	f.mustDecode(SetHealthType, idx, payload, &req)
	n, err := tx.SetHealth(idx, req.Updates)
	if err == nil && n < len(req.Updates) {
		f.logger.Debug("stale health updates dropped", "index", idx, "applied", n, "received", len(req.Updates))
	}
	return err
}

func (f *FSM) applySetHealthManual(tx *store.Txn, idx uint64, payload []byte) error {
	var req SetHealthManualRequest
	f.mustDecode(SetHealthManualType, idx, payload, &req)
	return tx.SetHealthManual(idx, req.Ref, req.Healthy)
}

func (f *FSM) applyUpsertMember(tx *store.Txn, idx uint64, payload []byte) error {
	var req UpsertMemberRequest
	f.mustDecode(UpsertMemberType, idx, payload, &req)
	return tx.UpsertMember(idx, req.Member)
}

func (f *FSM) applyRemoveMember(tx *store.Txn, idx uint64, payload []byte) error {
	var req RemoveMemberRequest
	f.mustDecode(RemoveMemberType, idx, payload, &req)
	return tx.RemoveMember(idx, req.ID)
}

package fsm

import (
	"strconv"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// MessageType is the first byte of every Raft log entry Roster writes.
type MessageType uint8

// IgnoreUnknownFlag marks a command that a node which does not know its type may skip.
// A node that meets an unknown type without this flag panics: its state must never
// silently diverge from its peers'.
const IgnoreUnknownFlag MessageType = 0x80

// Command types. The values are part of the log format: never renumber them.
const (
	RegisterInstanceType   MessageType = 1
	DeregisterInstanceType MessageType = 2
	UpdateInstanceType     MessageType = 3
	UpsertServiceType      MessageType = 4
	DeleteServiceType      MessageType = 5
	UpsertClusterType      MessageType = 6
	UpsertNamespaceType    MessageType = 7
	DeleteNamespaceType    MessageType = 8
	SetHealthType          MessageType = 9
	SetHealthManualType    MessageType = 10
	UpsertMemberType       MessageType = 11
	RemoveMemberType       MessageType = 12
	UpdateSettingsType     MessageType = 13
	CASType                MessageType = 14
	SetClusterIDType       MessageType = 15
	CheckStateType         MessageType = 16
	ACLBootstrapType       MessageType = 17
	CreateTokenType        MessageType = 18
	DeleteTokenType        MessageType = 19
	SetHealthAtType        MessageType = 20
	SetHealthManualAtType  MessageType = 21
	AutoDeregisterType     MessageType = 22
	BatchType              MessageType = 23
	LogCheckpointType      MessageType = 24
)

// NewestType is the highest command type this build applies. Servers announce it in
// their member record (model.Member.Commands), and the leader writes a command type
// only once every server of the configuration applies it: a server that meets an entry
// it cannot apply panics (see FSM.ApplyBatch), so a rolling upgrade must not put one in
// the log before the last old server is gone.
const NewestType = LogCheckpointType

// Command is one state-machine command: a payload struct of this package that knows its
// message type and how it applies to a transaction. Callers hand a Command to Raft
// (raftnode.Node.Apply), so a type can never be paired with the wrong payload.
type Command interface {
	MessageType() MessageType
	apply(f *FSM, tx *store.Txn, idx uint64) error
}

// RegisterInstanceRequest creates or replaces an instance (payload of RegisterInstanceType).
type RegisterInstanceRequest struct {
	Instance model.Instance
}

// DeregisterInstanceRequest removes an instance (DeregisterInstanceType).
type DeregisterInstanceRequest struct {
	Ref model.InstanceRef
}

// UpdateInstanceRequest changes the given fields of an existing instance (UpdateInstanceType).
type UpdateInstanceRequest struct {
	Ref   model.InstanceRef
	Patch model.InstancePatch
}

// UpsertServiceRequest creates or replaces a service's definition (UpsertServiceType).
type UpsertServiceRequest struct {
	Service model.Service
}

// DeleteServiceRequest removes a service without instances (DeleteServiceType).
type DeleteServiceRequest struct {
	Key model.ServiceKey
}

// UpsertClusterRequest creates or replaces a cluster's definition (UpsertClusterType).
type UpsertClusterRequest struct {
	Cluster model.Cluster
}

// UpsertNamespaceRequest creates or replaces a namespace (UpsertNamespaceType).
type UpsertNamespaceRequest struct {
	Namespace model.Namespace
}

// DeleteNamespaceRequest removes a namespace without services (DeleteNamespaceType).
type DeleteNamespaceRequest struct {
	ID string
}

// SetHealthRequest carries the prober's health transitions (SetHealthType). Each update
// applies only if the instance still exists with the same registration epoch.
type SetHealthRequest struct {
	Updates []model.HealthUpdate
}

// SetHealthManualRequest sets health by API (SetHealthManualType); it is refused with
// model.ErrConflict when the instance's cluster is probed (type other than NONE).
type SetHealthManualRequest struct {
	Ref     model.InstanceRef
	Healthy bool
}

// SetHealthAtRequest is SetHealthRequest with the leader's wall clock (SetHealthAtType):
// an instance it makes unhealthy records At as its UnhealthySince, so that every node
// applies the same time; one it makes healthy clears it.
type SetHealthAtRequest struct {
	Updates []model.HealthUpdate
	// At is when the leader submitted the command, in Unix milliseconds.
	At int64
}

// SetHealthManualAtRequest is SetHealthManualRequest with the leader's wall clock
// (SetHealthManualAtType), recorded as SetHealthAtRequest records it.
type SetHealthManualAtRequest struct {
	Ref     model.InstanceRef
	Healthy bool
	// At is when the leader submitted the command, in Unix milliseconds.
	At int64
}

// AutoDeregisterRequest deregisters an instance that stayed unhealthy for its cluster's
// deregisterAfter (AutoDeregisterType). It applies only if the instance still has the
// registration epoch and the UnhealthySince the leader saw; otherwise it is refused
// (model.ErrNotFound, model.ErrConflict) and changes nothing, so a retry never removes
// an instance twice, nor one that became healthy or was registered again.
type AutoDeregisterRequest struct {
	Instance store.AutoDeregistration
	// At is when the leader decided, in Unix milliseconds (for the record: At minus
	// UnhealthySince is how long the instance was unhealthy).
	At int64
}

// BatchRequest carries several commands in one log entry (BatchType): the registry
// gathers concurrent writes into one entry, so that they share one log write, one
// replication round and one state transaction. Each element is a whole command as
// Encode returns it (type byte, then payload). The commands apply in order at the
// entry's index, each with its own result: one that the state refuses fails alone and
// the others apply (Result.Batch). A batch never contains a batch; an element of a type
// the node does not know follows the rule of a whole entry (skipped when ignorable,
// otherwise the node panics), so a node older than the batch's commands refuses the
// entry instead of applying part of it.
type BatchRequest struct {
	Commands [][]byte
}

// MaxBatchCommands bounds the commands of one BatchRequest, so one entry stays a
// bounded unit of work for every node; the registry stays below it.
const MaxBatchCommands = 1024

// UpsertMemberRequest records a server's addresses (UpsertMemberType).
type UpsertMemberRequest struct {
	Member model.Member
}

// RemoveMemberRequest forgets a server's addresses (RemoveMemberType).
type RemoveMemberRequest struct {
	ID string
}

// UpdateSettingsRequest replaces the cluster-wide settings (UpdateSettingsType).
type UpdateSettingsRequest struct {
	Settings model.Settings
}

// SetClusterIDRequest records the cluster's identity, once (SetClusterIDType): the same
// id again changes nothing, another id is refused with model.ErrConflict.
type SetClusterIDRequest struct {
	ID string
}

// ACLBootstrapRequest bootstraps ACLs with their first, management token (ACLBootstrapType);
// a second bootstrap is refused with model.ErrConflict. The token holds its secret's
// hash only: no secret is ever written to the log.
type ACLBootstrapRequest struct {
	Token acl.Token
}

// CreateTokenRequest stores a new token (CreateTokenType), its secret as a hash.
type CreateTokenRequest struct {
	Token acl.Token
}

// DeleteTokenRequest removes a token by accessor id (DeleteTokenType).
type DeleteTokenRequest struct {
	AccessorID string
}

// CheckStateRequest changes nothing: every node records the hash of its state as of
// this entry (FSM.StateCheck), so that nodes can compare their states at the same index
// (CheckStateType).
type CheckStateRequest struct{}

// LogCheckpointRequest changes nothing: it marks a point of the log at which every node
// checks its own copy of the log since the previous checkpoint against the leader's
// (LogCheckpointType). What it checks travels in the entry's raft.Log.Extensions, which
// the leader's log store sets as the entry is written (raftnode's log verifier), not in
// this payload.
type LogCheckpointRequest struct{}

// CASRequest applies the command it carries only if the modify index of the object that
// command writes is Index, 0 meaning the object must not exist; otherwise it is refused
// with a *model.CASError (CASType). With OnService the condition is on the modify index
// of the service the command writes into instead (which every change to the service,
// its clusters and its instances raises). The condition is evaluated in the same
// transaction as the write. Only commands that write one instance, service or cluster
// can be conditional. Build it with NewCAS.
type CASRequest struct {
	Index     uint64
	OnService bool
	Type      MessageType
	Payload   []byte
}

// NewCAS wraps cmd in a CASRequest with the expected modify index of the object cmd
// writes (onService false) or of its service (onService true).
func NewCAS(index uint64, onService bool, cmd Conditional) (CASRequest, error) {
	b, err := Encode(cmd)
	if err != nil {
		return CASRequest{}, err
	}
	return CASRequest{Index: index, OnService: onService, Type: cmd.MessageType(), Payload: b[1:]}, nil
}

// Conditional is a Command that writes one object and can therefore be made conditional
// on that object's modify index.
type Conditional interface {
	Command
	// target names the object the command writes and returns its modify index (0:
	// absent) as of tx.
	target(tx *store.Txn) (what string, index uint64, err error)
	// service is the key of the service the command writes into.
	service() model.ServiceKey
}

// Message types of the commands.
func (RegisterInstanceRequest) MessageType() MessageType   { return RegisterInstanceType }
func (DeregisterInstanceRequest) MessageType() MessageType { return DeregisterInstanceType }
func (UpdateInstanceRequest) MessageType() MessageType     { return UpdateInstanceType }
func (UpsertServiceRequest) MessageType() MessageType      { return UpsertServiceType }
func (DeleteServiceRequest) MessageType() MessageType      { return DeleteServiceType }
func (UpsertClusterRequest) MessageType() MessageType      { return UpsertClusterType }
func (UpsertNamespaceRequest) MessageType() MessageType    { return UpsertNamespaceType }
func (DeleteNamespaceRequest) MessageType() MessageType    { return DeleteNamespaceType }
func (SetHealthRequest) MessageType() MessageType          { return SetHealthType }
func (SetHealthManualRequest) MessageType() MessageType    { return SetHealthManualType }
func (UpsertMemberRequest) MessageType() MessageType       { return UpsertMemberType }
func (RemoveMemberRequest) MessageType() MessageType       { return RemoveMemberType }
func (UpdateSettingsRequest) MessageType() MessageType     { return UpdateSettingsType }
func (CASRequest) MessageType() MessageType                { return CASType }
func (SetClusterIDRequest) MessageType() MessageType       { return SetClusterIDType }
func (CheckStateRequest) MessageType() MessageType         { return CheckStateType }
func (ACLBootstrapRequest) MessageType() MessageType       { return ACLBootstrapType }
func (CreateTokenRequest) MessageType() MessageType        { return CreateTokenType }
func (DeleteTokenRequest) MessageType() MessageType        { return DeleteTokenType }
func (SetHealthAtRequest) MessageType() MessageType        { return SetHealthAtType }
func (SetHealthManualAtRequest) MessageType() MessageType  { return SetHealthManualAtType }
func (AutoDeregisterRequest) MessageType() MessageType     { return AutoDeregisterType }
func (BatchRequest) MessageType() MessageType              { return BatchType }
func (LogCheckpointRequest) MessageType() MessageType      { return LogCheckpointType }

// String names the command type, for logs; the ignore flag shows as a "+ignorable" suffix.
func (t MessageType) String() string {
	suffix := ""
	if t&IgnoreUnknownFlag != 0 {
		suffix = "+ignorable"
	}
	var name string
	switch t &^ IgnoreUnknownFlag {
	case RegisterInstanceType:
		name = "RegisterInstance"
	case DeregisterInstanceType:
		name = "DeregisterInstance"
	case UpdateInstanceType:
		name = "UpdateInstance"
	case UpsertServiceType:
		name = "UpsertService"
	case DeleteServiceType:
		name = "DeleteService"
	case UpsertClusterType:
		name = "UpsertCluster"
	case UpsertNamespaceType:
		name = "UpsertNamespace"
	case DeleteNamespaceType:
		name = "DeleteNamespace"
	case SetHealthType:
		name = "SetHealth"
	case SetHealthManualType:
		name = "SetHealthManual"
	case UpsertMemberType:
		name = "UpsertMember"
	case RemoveMemberType:
		name = "RemoveMember"
	case UpdateSettingsType:
		name = "UpdateSettings"
	case CASType:
		name = "CAS"
	case SetClusterIDType:
		name = "SetClusterID"
	case CheckStateType:
		name = "CheckState"
	case ACLBootstrapType:
		name = "ACLBootstrap"
	case CreateTokenType:
		name = "CreateToken"
	case DeleteTokenType:
		name = "DeleteToken"
	case SetHealthAtType:
		name = "SetHealthAt"
	case SetHealthManualAtType:
		name = "SetHealthManualAt"
	case AutoDeregisterType:
		name = "AutoDeregister"
	case BatchType:
		name = "Batch"
	case LogCheckpointType:
		name = "LogCheckpoint"
	default:
		name = "MessageType(" + strconv.Itoa(int(t&^IgnoreUnknownFlag)) + ")"
	}
	return name + suffix
}

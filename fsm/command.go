package fsm

import (
	"strconv"

	"github.com/rosterhq/roster/model"
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
)

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

// UpsertMemberRequest records a server's addresses (UpsertMemberType).
type UpsertMemberRequest struct {
	Member model.Member
}

// RemoveMemberRequest forgets a server's addresses (RemoveMemberType).
type RemoveMemberRequest struct {
	ID string
}

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
	default:
		name = "MessageType(" + strconv.Itoa(int(t&^IgnoreUnknownFlag)) + ")"
	}
	return name + suffix
}

package fsm

import (
	"errors"
	"fmt"

	"github.com/rosterhq/roster/model"
)

// Rolling upgrades. A server announces the newest command type it applies
// (model.Member.NewestCommand); the leader writes an entry only once every server of
// the configuration announced a type at least as new as the entry requires (Required),
// falling back to an older encoding with the same effect where one exists (ForServers).
// A server that meets an entry it cannot apply anyway stops applying (see ApplyBatch and
// Halt) instead of diverging or crashing.

// LegacyNewestType is the newest type of a server that announces none: the releases
// before servers announced their newest type apply types 1 to 12 at least.
const LegacyNewestType = RemoveMemberType

// FirstAnnouncedType is the newest type of the first release whose servers announce it
// (v0.2.0). Fields added to the payloads of types 1 to 12 after the first release — the
// health checks beyond TCP, HTTP and NONE, majority confirmation, automatic
// deregistration, a member's newest type — are applied faithfully by every server that
// announces at least this type, and by no server that announces none.
const FirstAnnouncedType = BatchType

// ErrNeedsNewerServers is returned by ForServers for a command that some server of the
// cluster cannot apply, in any encoding.
var ErrNeedsNewerServers = errors.New("fsm: a server of the cluster cannot apply the command")

// requirer is a command whose payload may need a newer server than its type alone says.
type requirer interface {
	required() MessageType
}

// downgrader is a command that has an older encoding with the same effect on servers
// whose newest type is older than the command requires.
type downgrader interface {
	downgrade(newest MessageType) (Command, bool)
}

// Required is the newest command type a server must announce to apply cmd exactly as
// this build does: the command's own type, or for types 1 to 12 the type of the first
// release that applies the fields cmd uses (FirstAnnouncedType), else LegacyNewestType.
// A BatchRequest requires BatchType; its commands are checked one by one before they
// are batched.
func Required(cmd Command) MessageType {
	if r, ok := cmd.(requirer); ok {
		return r.required()
	}
	return cmd.MessageType()
}

// ForServers returns cmd in an encoding that a server whose newest type is newest
// applies as this build applies cmd: cmd itself when that server applies it, else an
// older command with the same effect on the state (a health change without the
// leader's clock, a member record without its newest type). A command with no such
// encoding fails with an error wrapping ErrNeedsNewerServers.
func ForServers(cmd Command, newest MessageType) (Command, error) {
	if Required(cmd) <= newest {
		return cmd, nil
	}
	if d, ok := cmd.(downgrader); ok {
		if older, ok := d.downgrade(newest); ok && Required(older) <= newest {
			return older, nil
		}
	}
	return nil, fmt.Errorf("%w: %s needs servers that apply command type %d (%s); the oldest announces %d",
		ErrNeedsNewerServers, cmd.MessageType(), Required(cmd), Required(cmd), newest)
}

// Types 1 to 12 that every release applies alike: the first release's payloads are a
// subset of today's, and what the state machine fills in itself (an instance's
// UnhealthySince) is not taken from the request.

func (RegisterInstanceRequest) required() MessageType   { return LegacyNewestType }
func (DeregisterInstanceRequest) required() MessageType { return LegacyNewestType }
func (UpdateInstanceRequest) required() MessageType     { return LegacyNewestType }
func (UpsertServiceRequest) required() MessageType      { return LegacyNewestType }
func (DeleteServiceRequest) required() MessageType      { return LegacyNewestType }
func (UpsertNamespaceRequest) required() MessageType    { return LegacyNewestType }
func (DeleteNamespaceRequest) required() MessageType    { return LegacyNewestType }
func (SetHealthRequest) required() MessageType          { return LegacyNewestType }
func (SetHealthManualRequest) required() MessageType    { return LegacyNewestType }
func (RemoveMemberRequest) required() MessageType       { return LegacyNewestType }

// A cluster whose health check uses only what the first release knew (TCP, HTTP and NONE
// checks on a port, path, headers, expected statuses, interval, timeout, rise and fall)
// applies everywhere; anything else needs FirstAnnouncedType.
func (c UpsertClusterRequest) required() MessageType {
	h := c.Cluster.HealthCheck
	switch {
	case h.Type != "" && h.Type != model.CheckTCP && h.Type != model.CheckHTTP && h.Type != model.CheckNone,
		h.Confirm != "", h.TLSServerName != "", h.TLSSkipVerify, h.TLSCAPEM != "", h.GRPCService != "", h.GRPCTLS,
		h.User != "", h.Password != "", h.Query != "", h.DeregisterAfter != 0:
		return FirstAnnouncedType
	}
	return LegacyNewestType
}

// A member record carries the server's newest type only for servers that store it.
func (c UpsertMemberRequest) required() MessageType {
	if c.Member.NewestCommand != 0 {
		return FirstAnnouncedType
	}
	return LegacyNewestType
}

func (c UpsertMemberRequest) downgrade(MessageType) (Command, bool) {
	c.Member.NewestCommand = 0
	return c, true
}

// A conditional write needs CASType and whatever the command it wraps needs.
func (c CASRequest) required() MessageType {
	inner := MessageType(0)
	if c.Type == UpsertClusterType {
		var u UpsertClusterRequest
		if Decode(c.Payload, &u) == nil {
			inner = u.required()
		}
	}
	return max(CASType, inner)
}

// Without the leader's clock a health change has the same effect, except that an
// instance made unhealthy records no UnhealthySince (so automatic deregistration counts
// from a later transition, once every server records the time).
func (c SetHealthAtRequest) downgrade(MessageType) (Command, bool) {
	return SetHealthRequest{Updates: c.Updates}, true
}

func (c SetHealthManualAtRequest) downgrade(MessageType) (Command, bool) {
	return SetHealthManualRequest{Ref: c.Ref, Healthy: c.Healthy}, true
}

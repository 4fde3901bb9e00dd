package nacos

import (
	"errors"
	"net/http"
	"strings"

	"github.com/rosterhq/roster/model"
)

// CheckClusterList is the one check of a comma-separated cluster list, for every Nacos
// surface: each non-blank name must be a cluster name; a refusal names field.
func CheckClusterList(field, list string) error {
	for _, c := range strings.Split(list, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if err := model.ValidateClusterName(c); err != nil {
			var ve *model.ValidationError
			if errors.As(err, &ve) {
				return model.Invalid(field, "%q is not a cluster name: %s", c, ve.Message)
			}
			return err
		}
	}
	return nil
}

// Why ResolveServiceKey refused a service reference, besides the model's validation.
var (
	ErrGroupedName   = errors.New("a grouped service name needs both parts")
	ErrGroupMismatch = errors.New("the group does not match the grouped service name")
)

// ResolveServiceKey is the one reading of a Nacos service reference, for every Nacos
// surface: the namespace ("" is public), the group ("" is DEFAULT_GROUP) and a service
// name that may carry its group ("group@@service", both parts non-empty, agreeing with
// group when that is given too). The key is validated; on errGroupMismatch it holds the
// group given.
func ResolveServiceKey(namespace, group, name string) (model.ServiceKey, error) {
	key := model.ServiceKey{Namespace: namespace, Group: group, Service: name}
	if g, svc, ok := strings.Cut(name, model.GroupSeparator); ok {
		if g == "" || svc == "" {
			return key, ErrGroupedName
		}
		if key.Group != "" && key.Group != g {
			return key, ErrGroupMismatch
		}
		key.Group, key.Service = g, svc
	}
	if key.Namespace == "" {
		key.Namespace = model.DefaultNamespace
	}
	if key.Group == "" {
		key.Group = model.DefaultGroup
	}
	return key, model.ValidateServiceKey(key)
}

// InstanceForm is what a register, update or patch request says about an instance.
type InstanceForm struct {
	Ref model.InstanceRef
	// Each field is set only when its parameter was given.
	Cluster   *string
	Weight    *float64
	Enabled   *bool
	Healthy   *bool
	Metadata  *map[string]string
	Ephemeral *bool
}

// Registration is the instance the form registers (registration).
func (f InstanceForm) Registration(limits model.Limits) (model.Instance, error) {
	ref := f.Ref
	in := model.Instance{
		Namespace: ref.Namespace, Group: ref.Group, Service: ref.Service, IP: ref.IP, Port: ref.Port,
		Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true,
	}
	if f.Cluster != nil {
		in.Cluster = *f.Cluster
	}
	if f.Weight != nil {
		in.Weight = *f.Weight
	}
	if f.Enabled != nil {
		in.Enabled = *f.Enabled
	}
	if f.Healthy != nil {
		in.Healthy = *f.Healthy
	}
	if f.Metadata != nil && len(*f.Metadata) > 0 {
		in.Metadata = *f.Metadata
	}
	if err := limits.AdmitInstance(in); err != nil {
		return model.Instance{}, err
	}
	if f.Ephemeral == nil || *f.Ephemeral {
		return model.Instance{}, EphemeralRefused(ref.ServiceKey(), "register")
	}
	return in, nil
}

// EphemeralRefused refuses an ephemeral instance with Nacos's own sentence, so that a
// client that forgot ephemeral=false fails loudly instead of losing its instance.
func EphemeralRefused(key model.ServiceKey, verb string) error {
	return Err(http.StatusBadRequest, CodeInstanceError,
		"Current service %s is persistent service, can't %s ephemeral instance. "+
			"Roster keeps persistent instances only: send ephemeral=false", key.GroupedName(), verb)
}

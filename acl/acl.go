// Package acl is Roster's access control: tokens with rules, what each rule allows, and
// the Authorizer a request carries once its token was resolved. It decides; it does not
// store (package store keeps the replicated tokens) or speak HTTP (httpx and nacos find
// the token in a request, registry resolves it and checks every permission).
//
// A token grants, per namespace, read or write access to the registry's data (a "*"
// key covers the namespaces without a key of their own: the most specific key wins),
// and read or write access to operator actions (members, joins and removals,
// leadership transfer, snapshots, settings, namespaces) and to ACL management. A
// management token has every permission. Write access includes read access.
package acl

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/rosterhq/roster/model"
)

// Access is a level of access: none, read, or write (which includes read).
type Access uint8

// Access levels, in increasing order.
const (
	None Access = iota
	Read
	Write
)

func (a Access) String() string {
	switch a {
	case None:
		return "none"
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return fmt.Sprintf("access(%d)", uint8(a))
}

// ParseAccess parses "none", "read" or "write" ("" is none).
func ParseAccess(s string) (Access, error) {
	switch s {
	case "none", "":
		return None, nil
	case "read":
		return Read, nil
	case "write":
		return Write, nil
	}
	return None, fmt.Errorf("%q is not an access level: want none, read or write", s)
}

// MarshalJSON writes the level's name.
func (a Access) MarshalJSON() ([]byte, error) { return json.Marshal(a.String()) }

// UnmarshalJSON reads a level's name.
func (a *Access) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("an access level is a string: none, read or write")
	}
	v, err := ParseAccess(s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// AnyNamespace is the namespace key that covers every namespace without a key of its own.
const AnyNamespace = "*"

// Rules are what a token may do.
type Rules struct {
	// Namespaces maps a namespace id, or AnyNamespace, to the access the token has to
	// the services, clusters and instances in it.
	Namespaces map[string]Access `json:"namespaces,omitempty"`
	// Operator is the access to cluster operations: read lists members and settings;
	// write joins, removes and moves leadership, saves and restores snapshots, changes
	// settings and creates or deletes namespaces.
	Operator Access `json:"operator"`
	// ACL is the access to tokens: read lists them, write creates and deletes them.
	ACL Access `json:"acl"`
}

// Namespace returns the access the rules give to namespace ns: its own key's, else
// the "*" key's, else none.
func (r Rules) Namespace(ns string) Access {
	if a, ok := r.Namespaces[ns]; ok {
		return a
	}
	return r.Namespaces[AnyNamespace]
}

// Limits of a token's fields.
const (
	MaxDescriptionLen = 256
	MaxNamespaceRules = 256
)

// Validate checks rules: namespace keys are namespace ids or "*", at most
// MaxNamespaceRules of them, and every level is known. Errors name the field.
func (r Rules) Validate() error {
	if len(r.Namespaces) > MaxNamespaceRules {
		return model.Invalid("rules.namespaces", "has %d keys; at most %d are allowed", len(r.Namespaces), MaxNamespaceRules)
	}
	for _, ns := range r.NamespaceKeys() {
		if ns != AnyNamespace {
			if err := model.ValidateNamespace(ns); err != nil {
				return model.Invalid("rules.namespaces", "key %q: %s", ns, validationMessage(err))
			}
		}
		if a := r.Namespaces[ns]; a > Write {
			return model.Invalid("rules.namespaces", "key %q: unknown access level %d", ns, a)
		}
	}
	if r.Operator > Write {
		return model.Invalid("rules.operator", "unknown access level %d", r.Operator)
	}
	if r.ACL > Write {
		return model.Invalid("rules.acl", "unknown access level %d", r.ACL)
	}
	return nil
}

// NamespaceKeys returns the namespace keys in order.
func (r Rules) NamespaceKeys() []string {
	keys := make([]string, 0, len(r.Namespaces))
	for k := range r.Namespaces {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// String describes the rules compactly: "namespaces public=write,*=read operator=read acl=none".
func (r Rules) String() string {
	var parts []string
	for _, k := range r.NamespaceKeys() {
		parts = append(parts, k+"="+r.Namespaces[k].String())
	}
	return fmt.Sprintf("namespaces %s operator=%s acl=%s", strings.Join(parts, ","), r.Operator, r.ACL)
}

func validationMessage(err error) string {
	var ve *model.ValidationError
	if errors.As(err, &ve) {
		return ve.Message
	}
	return err.Error()
}

// Token is a token as the replicated state keeps it: its secret only as a hash.
type Token struct {
	// AccessorID names the token (in lists, logs and deletions); it grants nothing.
	AccessorID string
	// SecretHash is HashSecret of the secret the token is presented with.
	SecretHash string
	// Description says what the token is for.
	Description string
	// Rules are what the token may do; a management token ignores them.
	Rules Rules
	// Management grants every permission (the bootstrap token is one).
	Management bool
	// CreateIndex is the Raft index that created the token.
	CreateIndex uint64
}

// Validate checks a token record: ids, hash, description and rules. Errors name the field.
func (t Token) Validate() error {
	if !IsID(t.AccessorID) {
		return model.Invalid("accessorId", "must be a UUID")
	}
	if !IsHash(t.SecretHash) {
		return model.Invalid("secretHash", "must be 64 lowercase hexadecimal digits")
	}
	if err := ValidateDescription(t.Description); err != nil {
		return err
	}
	return t.Rules.Validate()
}

// ValidateDescription checks a token's description: free text (valid UTF-8 without
// control characters, line separators or bidi controls), at most MaxDescriptionLen
// characters.
func ValidateDescription(d string) error {
	if err := model.CheckText("description", "a description", d); err != nil {
		return err
	}
	if utf8.RuneCountInString(d) > MaxDescriptionLen {
		return model.Invalid("description", "must be at most %d characters", MaxDescriptionLen)
	}
	return nil
}

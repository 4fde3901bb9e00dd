package acl

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rosterhq/roster/model"
)

func TestAuthorizer_Allows(t *testing.T) {
	rules := Rules{Namespaces: map[string]Access{"public": Write, "dev": None, "*": Read}, Operator: Read}
	a := ForToken(Token{Rules: rules})
	tests := []struct {
		p    Permission
		want bool
	}{
		{NamespacePermission("public", Write), true},
		{NamespacePermission("public", Read), true},
		{NamespacePermission("other", Read), true},   // "*"
		{NamespacePermission("other", Write), false}, // "*" is read only
		{NamespacePermission("dev", Read), false},    // its own key wins over "*"
		{NamespacePermission("dev", Write), false},
		{OperatorRead, true},
		{OperatorWrite, false},
		{ACLRead, false},
		{ACLWrite, false},
		{Permission{Resource: "unknown", Access: Read}, false},
	}
	for _, tc := range tests {
		if got := a.Allows(tc.p); got != tc.want {
			t.Errorf("Allows(%s) = %v, want %v", tc.p, got, tc.want)
		}
		err := a.Check(tc.p)
		var de *DeniedError
		if tc.want != (err == nil) || (err != nil && (!errors.Is(err, ErrPermissionDenied) || !errors.As(err, &de) || !strings.Contains(err.Error(), tc.p.String()))) {
			t.Errorf("Check(%s) = %v", tc.p, err)
		}
	}
	mgmt := ForToken(Token{Management: true})
	nobody := ForToken(Token{})
	for _, p := range []Permission{NamespacePermission("x", Write), OperatorWrite, ACLWrite} {
		if !mgmt.Allows(p) || !AllowAll().Allows(p) {
			t.Errorf("management or allow-all refused %s", p)
		}
		if nobody.Allows(p) || (*Authorizer)(nil).Allows(p) || (&Authorizer{}).Allows(p) {
			t.Errorf("an empty token, nil or zero authorizer allowed %s", p)
		}
	}
	if !a.CanRead("other") || a.CanRead("dev") {
		t.Error("CanRead does not follow the rules")
	}
}

func TestRules_Validate(t *testing.T) {
	many := map[string]Access{}
	for i := 0; i <= MaxNamespaceRules; i++ {
		many["ns"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+string(rune('a'+i/26%26))] = Read
	}
	tests := []struct {
		name  string
		rules Rules
		field string // "" when valid
	}{
		{"empty", Rules{}, ""},
		{"namespaces and star", Rules{Namespaces: map[string]Access{"public": Write, "*": Read}, Operator: Write, ACL: Read}, ""},
		{"bad namespace", Rules{Namespaces: map[string]Access{"a b": Read}}, "rules.namespaces"},
		{"empty namespace key", Rules{Namespaces: map[string]Access{"": Read}}, "rules.namespaces"},
		{"bad level", Rules{Namespaces: map[string]Access{"public": 7}}, "rules.namespaces"},
		{"bad operator", Rules{Operator: 3}, "rules.operator"},
		{"bad acl", Rules{ACL: 9}, "rules.acl"},
		{"too many", Rules{Namespaces: many}, "rules.namespaces"},
	}
	for _, tc := range tests {
		err := tc.rules.Validate()
		var ve *model.ValidationError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && (!errors.As(err, &ve) || ve.Field != tc.field):
			t.Errorf("%s: %v, want a validation error naming %s", tc.name, err, tc.field)
		}
	}
}

func TestAccess_JSON(t *testing.T) {
	var r Rules
	if err := json.Unmarshal([]byte(`{"namespaces":{"public":"write","*":"read"},"operator":"none","acl":"read"}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Namespace("public") != Write || r.Namespace("zzz") != Read || r.Operator != None || r.ACL != Read {
		t.Fatalf("decoded %+v", r)
	}
	b, _ := json.Marshal(r)
	if string(b) != `{"namespaces":{"*":"read","public":"write"},"operator":"none","acl":"read"}` {
		t.Fatalf("encoded %s", b)
	}
	for _, bad := range []string{`"admin"`, `2`, `null`} {
		var a Access
		if err := json.Unmarshal([]byte(bad), &a); err == nil && bad != `null` {
			t.Errorf("%s decoded as %v", bad, a)
		}
	}
}

func TestSecrets(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		id, err := NewID()
		if err != nil {
			t.Fatal(err)
		}
		if !IsID(id) || id[14] != '4' || seen[id] {
			t.Fatalf("id %q (valid %v, repeated %v)", id, IsID(id), seen[id])
		}
		seen[id] = true
	}
	for _, bad := range []string{"", "0b6e3c2a9f1d4e578a2b5c7d9e1f3a4b", "0B6E3C2A-9F1D-4E57-8A2B-5C7D9E1F3A4B", "0b6e3c2a-9f1d-4e57-8a2b-5c7d9e1f3a4", "0b6e3c2a-9f1d-4e57-8a2b_5c7d9e1f3a4b", "zb6e3c2a-9f1d-4e57-8a2b-5c7d9e1f3a4b"} {
		if IsID(bad) {
			t.Errorf("IsID(%q)", bad)
		}
	}
	h := HashSecret("s3cret")
	if !IsHash(h) || h != HashSecret("s3cret") || h == HashSecret("s3cret ") || IsHash(strings.ToUpper(h)) || IsHash(h[1:]) {
		t.Fatalf("hash %q", h)
	}
}

func TestToken_Validate(t *testing.T) {
	good := Token{AccessorID: "0b6e3c2a-9f1d-4e57-8a2b-5c7d9e1f3a4b", SecretHash: HashSecret("x"), Description: "deploy bot ✓"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Token){
		"accessor":    func(t *Token) { t.AccessorID = "nope" },
		"hash":        func(t *Token) { t.SecretHash = "x" },
		"control":     func(t *Token) { t.Description = "a\x1b[31m" },
		"bidi":        func(t *Token) { t.Description = "a\u202eb" },
		"long":        func(t *Token) { t.Description = strings.Repeat("é", MaxDescriptionLen+1) },
		"invalid utf": func(t *Token) { t.Description = "\xff" },
		"rules":       func(t *Token) { t.Rules.Operator = 5 },
	} {
		tok := good
		mut(&tok)
		if err := tok.Validate(); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
}

// Exceeds is the subset rule of token management: per resource, and per namespace
// with "*" standing for every namespace without a key of its own.
func TestRules_Exceeds(t *testing.T) {
	ns := func(kv ...any) map[string]Access {
		m := map[string]Access{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(Access)
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		r, have Rules
		want    string // the right r has beyond have; "" when within
	}{
		{name: "empty within empty", r: Rules{}, have: Rules{}},
		{name: "equal", r: Rules{Namespaces: ns("a", Write), Operator: Read, ACL: Write}, have: Rules{Namespaces: ns("a", Write), Operator: Read, ACL: Write}},
		{name: "operator above", r: Rules{Operator: Write}, have: Rules{Operator: Read}, want: "operator: write"},
		{name: "acl above", r: Rules{ACL: Write}, have: Rules{ACL: Read, Operator: Write}, want: "acl: write"},
		{name: "a namespace the caller lacks", r: Rules{Namespaces: ns("a", Read)}, have: Rules{Namespaces: ns("b", Write)}, want: `namespace "a": read`},
		{name: "write above read", r: Rules{Namespaces: ns("a", Write)}, have: Rules{Namespaces: ns("a", Read)}, want: `namespace "a": write`},
		{name: "a namespace under the caller's star", r: Rules{Namespaces: ns("a", Write)}, have: Rules{Namespaces: ns("*", Write)}},
		{name: "star above the caller's keys", r: Rules{Namespaces: ns("*", Read)}, have: Rules{Namespaces: ns("a", Write, "b", Write)}, want: `namespace "*": read`},
		{name: "star within star", r: Rules{Namespaces: ns("*", Read)}, have: Rules{Namespaces: ns("*", Write)}},
		{name: "star where the caller has an exception", r: Rules{Namespaces: ns("*", Read)}, have: Rules{Namespaces: ns("*", Write, "secret", None)}, want: `namespace "secret": read`},
		{name: "star with the same exception", r: Rules{Namespaces: ns("*", Read, "secret", None)}, have: Rules{Namespaces: ns("*", Write, "secret", None)}},
		{name: "an exception below the star is within", r: Rules{Namespaces: ns("*", None, "a", Read)}, have: Rules{Namespaces: ns("a", Read)}},
		{name: "explicit none is within anything", r: Rules{Namespaces: ns("a", None)}, have: Rules{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := tc.r.Exceeds(tc.have)
			if tc.want == "" {
				if ok {
					t.Fatalf("%s exceeds %s by %s, want within", tc.r, tc.have, p)
				}
				return
			}
			if !ok || p.String() != tc.want {
				t.Fatalf("%s beyond %s: %v %v, want %s", tc.r, tc.have, p, ok, tc.want)
			}
		})
	}
}

// CheckGrant: a management token may grant and take away anything, a token only rules
// within its own and never a management token; with ACLs off everything passes.
func TestAuthorizer_CheckGrant(t *testing.T) {
	aclWriter := ForToken(Token{Rules: Rules{Namespaces: map[string]Access{"dev": Write}, ACL: Write}})
	mgmt := ForToken(Token{Management: true})
	if err := AllowAll().CheckGrant("create", Token{Management: true}); err != nil {
		t.Fatalf("ACLs off: %v", err)
	}
	if err := mgmt.CheckGrant("delete", Token{Management: true}); err != nil {
		t.Fatalf("management deleting management: %v", err)
	}
	if err := aclWriter.CheckGrant("create", Token{Rules: Rules{Namespaces: map[string]Access{"dev": Read}, ACL: Write}}); err != nil {
		t.Fatalf("within its own rules: %v", err)
	}
	err := aclWriter.CheckGrant("create", Token{Rules: Rules{Namespaces: map[string]Access{"*": Write}}})
	var ge *GrantError
	if !errors.As(err, &ge) || !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), `namespace "*": write`) {
		t.Fatalf("a star beyond its own: %v", err)
	}
	err = aclWriter.CheckGrant("delete", Token{Management: true})
	if !errors.As(err, &ge) || !ge.Management || !strings.Contains(err.Error(), "only a management token may delete") {
		t.Fatalf("deleting a management token: %v", err)
	}
	if err := (&Authorizer{}).CheckGrant("create", Token{}); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("no token: %v", err)
	}
}

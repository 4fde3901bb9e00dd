package fsm

import (
	"encoding/hex"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

type example struct {
	name string
	t    MessageType
	msg  any
	// out is a pointer to a zero value of msg's type, to decode into.
	out any
}

// examples returns one command of every type, with every field of its payload set.
func examples() []example {
	ref := model.InstanceRef{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "10.0.0.1", Port: 8080}
	key := ref.ServiceKey()
	return []example{
		{"register_instance", RegisterInstanceType, RegisterInstanceRequest{Instance: model.Instance{
			Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "10.0.0.1", Port: 8080,
			Cluster: "DEFAULT", Weight: 1.5, Enabled: true, Healthy: true,
			Metadata: map[string]string{"zone": "a", "version": "v1"}, CreateIndex: 3, ModifyIndex: 4,
		}}, &RegisterInstanceRequest{}},
		{"deregister_instance", DeregisterInstanceType, DeregisterInstanceRequest{Ref: ref}, &DeregisterInstanceRequest{}},
		{"update_instance", UpdateInstanceType, UpdateInstanceRequest{Ref: ref, Patch: model.InstancePatch{
			Cluster: new("canary"), Weight: new(2.0), Enabled: new(false), Metadata: &map[string]string{"k": "v"},
		}}, &UpdateInstanceRequest{}},
		{"upsert_service", UpsertServiceType, UpsertServiceRequest{Service: model.Service{
			Namespace: "public", Group: "DEFAULT_GROUP", Name: "orders", ProtectThreshold: 0.25,
			Metadata: map[string]string{"team": "pay"}, CreateIndex: 1, ModifyIndex: 2,
		}}, &UpsertServiceRequest{}},
		{"delete_service", DeleteServiceType, DeleteServiceRequest{Key: key}, &DeleteServiceRequest{}},
		{"upsert_cluster", UpsertClusterType, UpsertClusterRequest{Cluster: model.Cluster{
			Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", Name: "web",
			HealthCheck: model.HealthCheck{
				Type: model.CheckHTTP, Port: 9090, Path: "/health", Headers: map[string]string{"Host": "orders"},
				ExpectedStatus: []int{200, 204}, Interval: model.Duration(5 * time.Second),
				Timeout: model.Duration(2 * time.Second), Rise: 2, Fall: 3,
			},
			Metadata: map[string]string{"tier": "front"}, CreateIndex: 5, ModifyIndex: 6,
		}}, &UpsertClusterRequest{}},
		// A spec with the fields added after the first release (omitted when empty, so
		// upsert_cluster above keeps its bytes).
		{"upsert_cluster_https", UpsertClusterType, UpsertClusterRequest{Cluster: model.Cluster{
			Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", Name: "tls",
			HealthCheck: model.HealthCheck{
				Type: model.CheckHTTPS, Port: 8443, Path: "/ready", Interval: model.Duration(5 * time.Second),
				Timeout: model.Duration(2 * time.Second), Rise: 2, Fall: 3,
				TLSServerName: "orders.internal", TLSSkipVerify: true, TLSCAPEM: "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n",
			},
			Metadata: map[string]string{}, CreateIndex: 5, ModifyIndex: 6,
		}}, &UpsertClusterRequest{}},
		{"upsert_namespace", UpsertNamespaceType, UpsertNamespaceRequest{Namespace: model.Namespace{
			ID: "dev", Name: "Development", Description: "dev stuff", CreateIndex: 7, ModifyIndex: 8,
		}}, &UpsertNamespaceRequest{}},
		{"delete_namespace", DeleteNamespaceType, DeleteNamespaceRequest{ID: "dev"}, &DeleteNamespaceRequest{}},
		{"set_health", SetHealthType, SetHealthRequest{Updates: []model.HealthUpdate{
			{Ref: ref, Epoch: 3, Healthy: false},
			{Ref: model.InstanceRef{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "::1", Port: 80}, Epoch: 9, Healthy: true},
		}}, &SetHealthRequest{}},
		{"set_health_manual", SetHealthManualType, SetHealthManualRequest{Ref: ref, Healthy: true}, &SetHealthManualRequest{}},
		{"upsert_member", UpsertMemberType, UpsertMemberRequest{Member: model.Member{
			ID: "n1", RaftAddr: "10.0.0.1:7848", HTTPAddr: "10.0.0.1:8848",
		}}, &UpsertMemberRequest{}},
		{"remove_member", RemoveMemberType, RemoveMemberRequest{ID: "n1"}, &RemoveMemberRequest{}},
		{"update_settings", UpdateSettingsType, UpdateSettingsRequest{Settings: model.Settings{MetadataMaxBytes: 4096, ModifyIndex: 12}}, &UpdateSettingsRequest{}},
		{"cas", CASType, mustCAS(7, DeregisterInstanceRequest{Ref: ref}), &CASRequest{}},
		{"set_cluster_id", SetClusterIDType, SetClusterIDRequest{ID: "5f2b8c1e-7a4d-4f0b-9c3e-2d1a6b8e9f00"}, &SetClusterIDRequest{}},
		{"check_state", CheckStateType, CheckStateRequest{}, &CheckStateRequest{}},
		{"log_checkpoint", LogCheckpointType, LogCheckpointRequest{}, &LogCheckpointRequest{}},
		{"acl_bootstrap", ACLBootstrapType, ACLBootstrapRequest{Token: acl.Token{
			AccessorID: "0b6e3c2a-9f1d-4e57-8a2b-5c7d9e1f3a4b", SecretHash: strings.Repeat("ab", 32),
			Description: "bootstrap management token", Management: true}}, &ACLBootstrapRequest{}},
		{"create_token", CreateTokenType, CreateTokenRequest{Token: acl.Token{
			AccessorID: "7d2f4a6c-1e3b-4c5d-9f8a-0b1c2d3e4f50", SecretHash: strings.Repeat("0f", 32),
			Description: "deploy bot", Rules: acl.Rules{Namespaces: map[string]acl.Access{"public": acl.Write, "*": acl.Read},
				Operator: acl.Read}}}, &CreateTokenRequest{}},
		{"set_health_at", SetHealthAtType, SetHealthAtRequest{Updates: []model.HealthUpdate{
			{Ref: ref, Epoch: 3, Healthy: false},
			{Ref: model.InstanceRef{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "::1", Port: 80}, Epoch: 9, Healthy: true},
		}, At: 1764676800123}, &SetHealthAtRequest{}},
		{"set_health_manual_at", SetHealthManualAtType, SetHealthManualAtRequest{Ref: ref, Healthy: false, At: 1764676800123}, &SetHealthManualAtRequest{}},
		{"auto_deregister", AutoDeregisterType, AutoDeregisterRequest{Instance: store.AutoDeregistration{
			Ref: ref, Epoch: 3, UnhealthySince: 1764676800123}, At: 1764936000456}, &AutoDeregisterRequest{}},
		{"upsert_member_newest_command", UpsertMemberType, UpsertMemberRequest{Member: model.Member{
			ID: "n2", RaftAddr: "127.0.0.2:7848", HTTPAddr: "127.0.0.2:8848", NewestCommand: uint8(BatchType),
		}}, &UpsertMemberRequest{}},
		{"batch", BatchType, BatchRequest{Commands: [][]byte{
			mustEncode(RegisterInstanceRequest{Instance: model.Instance{
				Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "127.0.0.9", Port: 8080,
				Cluster: "DEFAULT", Weight: 1, Enabled: true, Healthy: true, Metadata: map[string]string{"zone": "a"},
			}}),
			mustEncode(DeregisterInstanceRequest{Ref: ref}),
			mustEncode(mustCAS(7, UpdateInstanceRequest{Ref: ref, Patch: model.InstancePatch{Weight: new(3.0)}})),
		}}, &BatchRequest{}},
		{"delete_token", DeleteTokenType, DeleteTokenRequest{AccessorID: "7d2f4a6c-1e3b-4c5d-9f8a-0b1c2d3e4f50"}, &DeleteTokenRequest{}},
	}
}

func TestEncode_GoldenBytes(t *testing.T) {
	seen := map[MessageType]bool{}
	for _, ex := range examples() {
		t.Run(ex.name, func(t *testing.T) {
			seen[ex.t] = true
			cmd, ok := ex.msg.(Command)
			if !ok || cmd.MessageType() != ex.t {
				t.Fatalf("%T is not the Command of %s", ex.msg, ex.t)
			}
			got, err := Encode(cmd)
			if err != nil {
				t.Fatal(err)
			}
			if got[0] != byte(ex.t) {
				t.Fatalf("type byte %d, want %d", got[0], ex.t)
			}
			path := filepath.Join("testdata", ex.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(hexLines(got)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./fsm -run TestEncode_GoldenBytes -update to create it)", err)
			}
			want, err := hex.DecodeString(strings.Join(strings.Fields(string(raw)), ""))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if string(got) != string(want) {
				t.Fatalf("encoding of %s changed: the log format is frozen.\n got %x\nwant %x", ex.t, got, want)
			}
			// The pinned bytes decode back to the example.
			if err := Decode(want[1:], ex.out); err != nil {
				t.Fatal(err)
			}
			if back := reflect.ValueOf(ex.out).Elem().Interface(); !reflect.DeepEqual(back, ex.msg) {
				t.Fatalf("decoded %+v\nwant    %+v", back, ex.msg)
			}
		})
	}
	for mt := MessageType(1); mt < IgnoreUnknownFlag; mt++ {
		if _, known := New(nil, nil).decoders[mt]; known && !seen[mt] {
			t.Errorf("command type %s has no golden example", mt)
		}
	}
}

// hexLines formats b as lowercase hex, 32 bytes per line.
func hexLines(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		n := min(32, len(b))
		sb.WriteString(hex.EncodeToString(b[:n]))
		sb.WriteByte('\n')
		b = b[n:]
	}
	return sb.String()
}

func TestDecode_GarbageReturnsError(t *testing.T) {
	good, err := encodeRaw(RegisterInstanceType, examples()[0].msg)
	if err != nil {
		t.Fatal(err)
	}
	payload := good[1:]
	cases := map[string][]byte{
		"empty":          nil,
		"reserved byte":  {0xc1},
		"truncated":      payload[:len(payload)/2],
		"trailing bytes": append(append([]byte{}, payload...), 0x01),
		"wrong shape":    {0x93, 0x01, 0x02, 0x03},
		"huge length":    {0xdd, 0xff, 0xff, 0xff, 0xff},
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			var req RegisterInstanceRequest
			if err := Decode(data, &req); !errors.Is(err, ErrDecode) {
				t.Fatalf("Decode = %v, want ErrDecode", err)
			}
		})
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 2000 {
		data := make([]byte, rng.IntN(64))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		var req UpsertClusterRequest
		_ = Decode(data, &req) // must not panic
	}
	if err := Decode(payload, RegisterInstanceRequest{}); !errors.Is(err, ErrDecode) {
		t.Fatalf("decode into a non-pointer: %v", err)
	}
}

func TestMessageType_String(t *testing.T) {
	for mt, want := range map[MessageType]string{
		RegisterInstanceType:                 "RegisterInstance",
		RemoveMemberType | IgnoreUnknownFlag: "RemoveMember+ignorable",
		MessageType(99):                      "MessageType(99)",
		MessageType(99) | IgnoreUnknownFlag:  "MessageType(99)+ignorable",
	} {
		if got := mt.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint8(mt), got, want)
		}
	}
}

func mustCAS(index uint64, c Conditional) CASRequest {
	r, err := NewCAS(index, false, c)
	if err != nil {
		panic(err)
	}
	return r
}

func mustEncode(c Command) []byte {
	b, err := Encode(c)
	if err != nil {
		panic(err)
	}
	return b
}

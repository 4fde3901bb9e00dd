package fsm

import (
	"errors"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// Every command type × the newest type the oldest server announces: the command goes as
// it is, goes in an older encoding, or is refused. LegacyNewestType is what a server
// that announces nothing counts as.
func TestForServers_EveryCommandType(t *testing.T) {
	ref := model.InstanceRef{Namespace: "public", Group: "g", Service: "s", IP: "127.0.0.1", Port: 80}
	ups := []model.HealthUpdate{{Ref: ref, Epoch: 3, Healthy: false}}
	legacyCluster := model.Cluster{Namespace: "public", Group: "g", Service: "s", Name: "DEFAULT",
		HealthCheck: model.HealthCheck{Type: model.CheckHTTP, Path: "/h", Headers: map[string]string{"A": "b"}, ExpectedStatus: []int{204},
			Interval: model.Duration(5 * time.Second), Timeout: model.Duration(time.Second), Rise: 2, Fall: 3}}
	newCheck := func(mod func(*model.HealthCheck)) UpsertClusterRequest {
		c := legacyCluster
		mod(&c.HealthCheck)
		return UpsertClusterRequest{Cluster: c}
	}
	member := model.Member{ID: "n1", RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8001"}
	announced := member
	announced.NewestCommand = uint8(NewestType)
	cas := func(cmd Conditional) CASRequest {
		c, err := NewCAS(7, false, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const (
		asIs = iota
		older
		refused
	)
	type gateCase struct {
		name   string
		cmd    Command
		newest MessageType
		want   int
		as     Command // the older encoding
	}
	tests := []gateCase{
		{"register at legacy", RegisterInstanceRequest{Instance: testInstance("127.0.0.1", 80)}, LegacyNewestType, asIs, nil},
		{"deregister at legacy", DeregisterInstanceRequest{Ref: ref}, LegacyNewestType, asIs, nil},
		{"update at legacy", UpdateInstanceRequest{Ref: ref}, LegacyNewestType, asIs, nil},
		{"upsert service at legacy", UpsertServiceRequest{Service: model.Service{Namespace: "public", Group: "g", Name: "s"}}, LegacyNewestType, asIs, nil},
		{"delete service at legacy", DeleteServiceRequest{Key: ref.ServiceKey()}, LegacyNewestType, asIs, nil},
		{"legacy cluster at legacy", UpsertClusterRequest{Cluster: legacyCluster}, LegacyNewestType, asIs, nil},
		{"upsert namespace at legacy", UpsertNamespaceRequest{Namespace: model.Namespace{ID: "n", Name: "n"}}, LegacyNewestType, asIs, nil},
		{"delete namespace at legacy", DeleteNamespaceRequest{ID: "n"}, LegacyNewestType, asIs, nil},
		{"set health at legacy", SetHealthRequest{Updates: ups}, LegacyNewestType, asIs, nil},
		{"set health manual at legacy", SetHealthManualRequest{Ref: ref}, LegacyNewestType, asIs, nil},
		{"member without newest at legacy", UpsertMemberRequest{Member: member}, LegacyNewestType, asIs, nil},
		{"remove member at legacy", RemoveMemberRequest{ID: "n1"}, LegacyNewestType, asIs, nil},

		{"member with newest at legacy", UpsertMemberRequest{Member: announced}, LegacyNewestType, older, UpsertMemberRequest{Member: member}},
		{"member with newest at first announced", UpsertMemberRequest{Member: announced}, FirstAnnouncedType, asIs, nil},
		{"health with the clock at legacy", SetHealthAtRequest{Updates: ups, At: 5}, LegacyNewestType, older, SetHealthRequest{Updates: ups}},
		{"health with the clock, one type short", SetHealthAtRequest{Updates: ups, At: 5}, SetHealthAtType - 1, older, SetHealthRequest{Updates: ups}},
		{"health with the clock at its type", SetHealthAtRequest{Updates: ups, At: 5}, SetHealthAtType, asIs, nil},
		{"manual health with the clock at legacy", SetHealthManualAtRequest{Ref: ref, Healthy: true, At: 5}, LegacyNewestType, older, SetHealthManualRequest{Ref: ref, Healthy: true}},
		{"manual health with the clock at its type", SetHealthManualAtRequest{Ref: ref, At: 5}, SetHealthManualAtType, asIs, nil},

		{"settings at legacy", UpdateSettingsRequest{Settings: model.DefaultSettings()}, LegacyNewestType, refused, nil},
		{"settings at their type", UpdateSettingsRequest{Settings: model.DefaultSettings()}, UpdateSettingsType, asIs, nil},
		{"cas at legacy", cas(RegisterInstanceRequest{Instance: testInstance("127.0.0.1", 80)}), LegacyNewestType, refused, nil},
		{"cas at its type", cas(RegisterInstanceRequest{Instance: testInstance("127.0.0.1", 80)}), CASType, asIs, nil},
		{"cas of a new check at its type", cas(newCheck(func(h *model.HealthCheck) {
			h.Type, h.Path = model.CheckTCP, ""
			h.DeregisterAfter = model.Duration(time.Hour)
		})), CASType, refused, nil},
		{"cas of a new check at first announced", cas(newCheck(func(h *model.HealthCheck) { h.Confirm = model.ConfirmLeader })), FirstAnnouncedType, asIs, nil},
		{"cluster id at legacy", SetClusterIDRequest{ID: "x"}, LegacyNewestType, refused, nil},
		{"cluster id at its type", SetClusterIDRequest{ID: "x"}, SetClusterIDType, asIs, nil},
		{"state check at legacy", CheckStateRequest{}, LegacyNewestType, refused, nil},
		{"state check one type short", CheckStateRequest{}, CheckStateType - 1, refused, nil},
		{"state check at its type", CheckStateRequest{}, CheckStateType, asIs, nil},
		{"log checkpoint at the previous release's newest", LogCheckpointRequest{}, BatchType, refused, nil},
		{"log checkpoint at its type", LogCheckpointRequest{}, LogCheckpointType, asIs, nil},
		{"acl bootstrap at legacy", ACLBootstrapRequest{}, LegacyNewestType, refused, nil},
		{"acl bootstrap at its type", ACLBootstrapRequest{}, ACLBootstrapType, asIs, nil},
		{"create token one type short", CreateTokenRequest{}, CreateTokenType - 1, refused, nil},
		{"create token at its type", CreateTokenRequest{}, CreateTokenType, asIs, nil},
		{"delete token at legacy", DeleteTokenRequest{AccessorID: "a"}, LegacyNewestType, refused, nil},
		{"delete token at its type", DeleteTokenRequest{AccessorID: "a"}, DeleteTokenType, asIs, nil},
		{"auto deregister at legacy", AutoDeregisterRequest{At: 5}, LegacyNewestType, refused, nil},
		{"auto deregister one type short", AutoDeregisterRequest{At: 5}, AutoDeregisterType - 1, refused, nil},
		{"auto deregister at its type", AutoDeregisterRequest{At: 5}, AutoDeregisterType, asIs, nil},
		{"batch at legacy", BatchRequest{}, LegacyNewestType, refused, nil},
		{"batch one type short", BatchRequest{}, BatchType - 1, refused, nil},
		{"batch at its type", BatchRequest{}, BatchType, asIs, nil},
	}
	// Every check feature added after the first release needs FirstAnnouncedType.
	for name, mod := range map[string]func(*model.HealthCheck){
		"HTTPS": func(h *model.HealthCheck) { h.Type = model.CheckHTTPS },
		"TLS":   func(h *model.HealthCheck) { h.Type, h.Path, h.Headers, h.ExpectedStatus = model.CheckTLS, "", nil, nil },
		"GRPC": func(h *model.HealthCheck) {
			h.Type, h.Path, h.Headers, h.ExpectedStatus = model.CheckGRPC, "", nil, nil
		},
		"MYSQL":           func(h *model.HealthCheck) { h.Type, h.User = model.CheckMySQL, "u" },
		"confirm":         func(h *model.HealthCheck) { h.Confirm = model.ConfirmMajority },
		"deregisterAfter": func(h *model.HealthCheck) { h.DeregisterAfter = model.Duration(time.Hour) },
		"tlsServerName":   func(h *model.HealthCheck) { h.TLSServerName = "db" },
		"tlsSkipVerify":   func(h *model.HealthCheck) { h.TLSSkipVerify = true },
		"tlsCaPem":        func(h *model.HealthCheck) { h.TLSCAPEM = "pem" },
		"grpcService":     func(h *model.HealthCheck) { h.GRPCService = "s" },
		"grpcTls":         func(h *model.HealthCheck) { h.GRPCTLS = true },
		"user":            func(h *model.HealthCheck) { h.User = "u" },
		"password":        func(h *model.HealthCheck) { h.Password = "p" },
		"query":           func(h *model.HealthCheck) { h.Query = "q" },
	} {
		tests = append(tests,
			gateCase{"check with " + name + " at legacy", newCheck(mod), LegacyNewestType, refused, nil},
			gateCase{"check with " + name + " at first announced", newCheck(mod), FirstAnnouncedType, asIs, nil})
	}
	covered := map[MessageType]bool{}
	for _, tc := range tests {
		covered[tc.cmd.MessageType()] = true
		t.Run(tc.name, func(t *testing.T) {
			got, err := ForServers(tc.cmd, tc.newest)
			switch tc.want {
			case asIs:
				if err != nil || !reflect.DeepEqual(got, tc.cmd) {
					t.Fatalf("ForServers = %#v, %v; want the command as it is", got, err)
				}
			case older:
				if err != nil || !reflect.DeepEqual(got, tc.as) {
					t.Fatalf("ForServers = %#v, %v; want %#v", got, err, tc.as)
				}
				if Required(got) > tc.newest {
					t.Fatalf("the older encoding requires %s, more than %s", Required(got), tc.newest)
				}
			case refused:
				if !errors.Is(err, ErrNeedsNewerServers) || got != nil {
					t.Fatalf("ForServers = %#v, %v; want ErrNeedsNewerServers", got, err)
				}
			}
		})
	}
	for mt := MessageType(1); mt <= NewestType; mt++ {
		if !covered[mt] {
			t.Errorf("no case for command type %s", mt)
		}
	}
}

// The payloads of types 1 to 12 are applied alike by every release only while they use
// the first release's fields (fsm/upgrade.go): a field added to one of their records must
// be gated there and listed here, or this test fails.
func TestRequired_RecordFieldsOfTheLegacyTypes(t *testing.T) {
	legacy := map[string][]string{
		"Instance": {"Namespace", "Group", "Service", "IP", "Port", "Cluster", "Weight", "Enabled", "Healthy", "Metadata",
			"CreateIndex", "ModifyIndex",
			"UnhealthySince"}, // set by the state machine, never taken from a request
		"InstancePatch": {"Cluster", "Weight", "Enabled", "Metadata"},
		"InstanceRef":   {"Namespace", "Group", "Service", "IP", "Port"},
		"Service":       {"Namespace", "Group", "Name", "ProtectThreshold", "Metadata", "CreateIndex", "ModifyIndex"},
		"Cluster":       {"Namespace", "Group", "Service", "Name", "HealthCheck", "Metadata", "CreateIndex", "ModifyIndex"},
		"Namespace":     {"ID", "Name", "Description", "CreateIndex", "ModifyIndex"},
		"HealthUpdate":  {"Ref", "Epoch", "Healthy"},
		"Member":        {"ID", "RaftAddr", "HTTPAddr", "NewestCommand"}, // NewestCommand gated: UpsertMemberRequest.required
		"HealthCheck": {"Type", "Port", "Path", "Headers", "ExpectedStatus", "Interval", "Timeout", "Rise", "Fall",
			// gated: UpsertClusterRequest.required
			"Confirm", "TLSServerName", "TLSSkipVerify", "TLSCAPEM", "GRPCService", "GRPCTLS", "User", "Password", "Query", "DeregisterAfter"},
	}
	for _, v := range []any{model.Instance{}, model.InstancePatch{}, model.InstanceRef{}, model.Service{}, model.Cluster{},
		model.Namespace{}, model.HealthUpdate{}, model.Member{}, model.HealthCheck{}} {
		rt := reflect.TypeOf(v)
		var fields []string
		for i := range rt.NumField() {
			fields = append(fields, rt.Field(i).Name)
		}
		want := append([]string(nil), legacy[rt.Name()]...)
		sort.Strings(fields)
		sort.Strings(want)
		if !reflect.DeepEqual(fields, want) {
			t.Errorf("model.%s has fields %v; the gate in fsm/upgrade.go knows %v: gate the new field and list it here", rt.Name(), fields, want)
		}
	}
}

// A node that halted at an entry it cannot apply keeps its data as it is; started again
// on a build that applies the entry, it resumes from it, and its state is the state of a
// node that applied the whole log at once.
func TestHalt_RestartOnNewerBuildResumes(t *testing.T) {
	ref := testInstance("127.100.0.1", 80)
	logs := []*raft.Log{
		cmdLog(t, 1, RegisterInstanceType, RegisterInstanceRequest{Instance: ref}),
		cmdLog(t, 2, UpdateSettingsType, UpdateSettingsRequest{Settings: model.Settings{MetadataMaxBytes: 2048}}),
		cmdLog(t, 3, RegisterInstanceType, RegisterInstanceRequest{Instance: testInstance("127.100.0.2", 80)}),
	}
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	old := newFSM(st, nil, LegacyNewestType)
	mustHalt(t, old, logs, 2, HaltNeedsUpgrade)
	if old.AppliedIndex() != 1 {
		t.Fatalf("applied %d before the halt, want 1", old.AppliedIndex())
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = mustOpenStore(t, path)
	newer := New(st, nil)
	if newer.Halted() != nil {
		t.Fatal("a new process starts halted")
	}
	// Raft replays the log from the start; the state skips what it has applied.
	applyOK(t, newer, logs...)
	if _, set, err := st.Settings(nil); err != nil || set.MetadataMaxBytes != 2048 {
		t.Fatalf("settings %+v (%v) after the resume, want metadataMaxBytes 2048", set, err)
	}

	whole := mustNewFSM(t)
	applyOK(t, whole, logs...)
	_, want, err := whole.Store().StateHash()
	if err != nil {
		t.Fatal(err)
	}
	if _, got, err := st.StateHash(); err != nil || got != want {
		t.Fatalf("state hash after resuming %s (%v), want %s", got, err, want)
	}
}

package httpapi

import (
	"cmp"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/store"
)

// This file turns the lower layers' types into the native API's wire types (package
// api). The handlers build their responses only through these functions, so the JSON
// the API shows is decided here and nowhere else; wire_test.go pins it.

// wireList converts every element of l with conv; an empty or nil l gives an empty,
// non-nil slice (JSON [] rather than null).
func wireList[T, W any](l []T, conv func(T) W) []W {
	out := make([]W, len(l))
	for i, v := range l {
		out[i] = conv(v)
	}
	return out
}

func wireNamespace(ns model.Namespace) api.Namespace {
	return api.Namespace{
		ID:          ns.ID,
		Name:        ns.Name,
		Description: ns.Description,
		CreateIndex: ns.CreateIndex,
		ModifyIndex: ns.ModifyIndex,
	}
}

func wireService(s model.Service) api.Service {
	return api.Service{
		Namespace:        s.Namespace,
		Group:            s.Group,
		Name:             s.Name,
		ProtectThreshold: s.ProtectThreshold,
		Metadata:         s.Metadata,
		CreateIndex:      s.CreateIndex,
		ModifyIndex:      s.ModifyIndex,
	}
}

func wireServiceSummary(s store.ServiceSummary) api.ServiceSummary {
	return api.ServiceSummary{Service: wireService(s.Service), InstanceCount: s.Instances, HealthyCount: s.Healthy,
		ProtectThresholdReached: s.ProtectThresholdReached()}
}

// wireHealthCheck shows a spec with its password, if any, redacted.
func wireHealthCheck(h model.HealthCheck) api.HealthCheck {
	h = h.Redacted()
	return api.HealthCheck{
		Type:           string(h.Type),
		Port:           h.Port,
		Path:           h.Path,
		Headers:        h.Headers,
		ExpectedStatus: h.ExpectedStatus,
		Interval:       api.Duration(h.Interval),
		Timeout:        api.Duration(h.Timeout),
		Rise:           h.Rise,
		Fall:           h.Fall,
		Confirm:        string(cmp.Or(h.Confirm, model.ConfirmMajority)),
		TLSServerName:  h.TLSServerName,
		TLSSkipVerify:  h.TLSSkipVerify,
		TLSCAPEM:       h.TLSCAPEM,
		GRPCService:    h.GRPCService,
		GRPCTLS:        h.GRPCTLS,
		User:           h.User,
		Password:       h.Password,
		Query:          h.Query,

		DeregisterAfter: api.Duration(h.DeregisterAfter),
	}
}

func wireCluster(c model.Cluster) api.Cluster {
	return api.Cluster{
		Namespace:   c.Namespace,
		Group:       c.Group,
		Service:     c.Service,
		Name:        c.Name,
		HealthCheck: wireHealthCheck(c.HealthCheck),
		Metadata:    c.Metadata,
		CreateIndex: c.CreateIndex,
		ModifyIndex: c.ModifyIndex,
	}
}

// wireInstance adds the Nacos instance id to the instance.
func wireInstance(in model.Instance) api.Instance {
	out := api.Instance{
		Namespace:   in.Namespace,
		Group:       in.Group,
		Service:     in.Service,
		IP:          in.IP,
		Port:        in.Port,
		Cluster:     in.Cluster,
		Weight:      in.Weight,
		Enabled:     in.Enabled,
		Healthy:     in.Healthy,
		Metadata:    in.Metadata,
		CreateIndex: in.CreateIndex,
		ModifyIndex: in.ModifyIndex,
		InstanceID:  in.InstanceID(),
	}
	if in.UnhealthySince > 0 {
		t := time.UnixMilli(in.UnhealthySince).UTC()
		out.UnhealthySince = &t
	}
	return out
}

func wireSettings(s model.Settings) api.Settings {
	return api.Settings{MetadataMaxBytes: s.MetadataMaxBytes, ModifyIndex: s.ModifyIndex}
}

func wireLeader(m model.Member) api.Leader {
	return api.Leader{ID: m.ID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr}
}

func wireReady(r raftnode.Readiness) api.Ready {
	return api.Ready{
		Ready:             r.Ready,
		Leader:            r.Leader,
		AppliedIndex:      r.AppliedIndex,
		CommitIndex:       r.CommitIndex,
		LeaderCommitIndex: r.LeaderCommitIndex,
		ClusterID:         r.ClusterID,
		Reason:            r.Reason,
		ReasonCode:        readyCode(r),
		HaltedAt:          haltedAt(r.Halt),
		Build:             wireOwnBuild(r),
	}
}

// wireOwnBuild is a node's own build (nil when it reports none).
func wireOwnBuild(r raftnode.Readiness) *api.Build {
	if r.Build.Version == "" {
		return nil
	}
	return &api.Build{Version: r.Build.Version, Commit: r.Build.Commit, GoVersion: r.Build.GoVersion, NewestCommand: r.NewestCommand}
}

// readyCode classifies a readiness report's reason.
func readyCode(r raftnode.Readiness) string {
	if r.Halt != nil && r.Halt.Reason == fsm.HaltNeedsUpgrade && !r.Ready {
		return api.ReasonNeedsUpgrade
	}
	return ""
}

func haltedAt(h *fsm.Halt) *api.HaltedEntry {
	if h == nil {
		return nil
	}
	return &api.HaltedEntry{Index: h.Index, Type: uint8(h.Type &^ fsm.IgnoreUnknownFlag), TypeName: h.Type.String()}
}

// wireMember shows the last contact in milliseconds, -1 when unknown.
func wireMember(m raftnode.Member) api.Member {
	lc := int64(-1)
	if m.LastContact >= 0 {
		lc = m.LastContact.Milliseconds()
	}
	return api.Member{
		ID:                m.ID,
		RaftAddr:          m.RaftAddr,
		HTTPAddr:          m.HTTPAddr,
		Voter:             m.Voter,
		Leader:            m.Leader,
		LastContactMillis: lc,
		Version:           m.Build.Version,
		Commit:            m.Build.Commit,
		NewestCommand:     m.Build.NewestCommand,
		Release:           m.Build.Release(),
	}
}

// wireBuild is a server's build as errors name it.
func wireBuild(b raftnode.ServerBuild) api.NodeBuild {
	return api.NodeBuild{ID: b.ID, Version: b.Version, Commit: b.Commit, NewestCommand: b.NewestCommand, Release: b.Release()}
}

func wireProbeResult(r healthcheck.Result) api.ProbeResult {
	return api.ProbeResult{
		IP:                   r.IP,
		Port:                 r.Port,
		Cluster:              r.Cluster,
		Epoch:                r.Epoch,
		CheckType:            string(r.CheckType),
		Target:               r.Target,
		Healthy:              r.Healthy,
		Pending:              r.Pending,
		LastCheck:            r.LastCheck,
		Latency:              api.Duration(r.Latency),
		Outcome:              r.Outcome,
		Status:               r.Status,
		Error:                r.Error,
		CertificateExpiry:    r.CertificateExpiry,
		ConsecutiveSuccesses: r.ConsecutiveSuccesses,
		ConsecutiveFailures:  r.ConsecutiveFailures,
		Rise:                 r.Rise,
		Fall:                 r.Fall,
		Interval:             api.Duration(r.Interval),
		NextCheck:            r.NextCheck,
		Vantages:             wireVantages(r.Vantages),
		DeregisterAt:         r.DeregisterAt,
	}
}

// wireVantages converts a confirmation's views (nil stays nil: the field is omitted).
func wireVantages(vs []healthcheck.Vantage) []api.Vantage {
	if len(vs) == 0 {
		return nil
	}
	return wireList(vs, wireVantage)
}

func wireVantage(v healthcheck.Vantage) api.Vantage {
	return api.Vantage{Node: v.Node, Answered: v.Answered, Healthy: v.Healthy, Outcome: v.Outcome, Error: v.Error,
		Latency: api.Duration(v.Latency), At: v.At}
}

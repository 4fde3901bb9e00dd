package store

import (
	"errors"
	"testing"
	"time"

	"github.com/rosterhq/roster/model"
)

func TestUpsertCluster_ImplicitServiceDefaultsAndReplace(t *testing.T) {
	s := mustNewStore(t)
	c := model.Cluster{Namespace: "dev", Group: "g", Service: "a", Name: "web",
		HealthCheck: model.HealthCheck{Type: model.CheckHTTP, Headers: map[string]string{}}}
	mustDo(t, s.UpsertCluster(3, c))
	key := model.ServiceKey{Namespace: "dev", Group: "g", Service: "a"}
	idx, got, err := s.Cluster(nil, key, "web")
	mustDo(t, err)
	if idx != 3 || got.CreateIndex != 3 || got.ModifyIndex != 3 {
		t.Fatalf("created: idx %d %+v", idx, got)
	}
	hc := got.HealthCheck
	if hc.Path != "/" || hc.Interval.D() != model.DefaultCheckInterval || hc.Rise != model.DefaultRise || hc.Headers != nil {
		t.Fatalf("defaults not applied: %+v", hc)
	}
	if svc := mustService(t, s, key); svc.CreateIndex != 3 {
		t.Fatalf("implicit service %+v", svc)
	}

	c.HealthCheck = model.HealthCheck{Type: model.CheckNone}
	mustDo(t, s.UpsertCluster(7, c))
	_, got, _ = s.Cluster(nil, key, "web")
	if got.CreateIndex != 3 || got.ModifyIndex != 7 || got.HealthCheck.Type != model.CheckNone {
		t.Fatalf("replaced: %+v", got)
	}
	if svc := mustService(t, s, key); svc.ModifyIndex != 7 {
		t.Fatalf("service ModifyIndex = %d, want 7", svc.ModifyIndex)
	}

	before := mustDump(t, s)
	mustDo(t, s.UpsertCluster(8, c))
	assertUnchanged(t, s, before)
}

func TestUpsertCluster_ValidationNamesFieldAndWritesNothing(t *testing.T) {
	s := mustNewStore(t)
	before := mustDump(t, s)
	base := model.Cluster{Namespace: "dev", Group: "g", Service: "a", Name: "web"}
	cases := map[string]func(*model.Cluster){
		"cluster":              func(c *model.Cluster) { c.Name = "no spaces" },
		"healthCheck.type":     func(c *model.Cluster) { c.HealthCheck.Type = "UDP" },
		"healthCheck.interval": func(c *model.Cluster) { c.HealthCheck.Interval = model.Duration(100 * time.Millisecond) },
		"healthCheck.rise":     func(c *model.Cluster) { c.HealthCheck.Rise = 11 },
		"healthCheck.path":     func(c *model.Cluster) { c.HealthCheck.Type, c.HealthCheck.Path = model.CheckHTTP, "health" },
		"service":              func(c *model.Cluster) { c.Service = "" },
	}
	for field, mutate := range cases {
		c := base
		mutate(&c)
		assertField(t, s.UpsertCluster(1, c), field)
	}
	assertUnchanged(t, s, before)
}

func TestClusters_SortedAndNotFound(t *testing.T) {
	s := mustNewStore(t)
	if _, _, err := s.Clusters(nil, testKey); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing service: %v", err)
	}
	for i, name := range []string{"zeta", "alpha", "mid"} {
		mustDo(t, s.UpsertCluster(uint64(i+1), model.Cluster{Namespace: testKey.Namespace, Group: testKey.Group, Service: testKey.Service, Name: name}))
	}
	idx, cs, err := s.Clusters(nil, testKey)
	mustDo(t, err)
	if idx != 3 || len(cs) != 3 || cs[0].Name != "alpha" || cs[1].Name != "mid" || cs[2].Name != "zeta" {
		t.Fatalf("Clusters = %d %+v", idx, cs)
	}
	if _, _, err := s.Cluster(nil, testKey, "nope"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing cluster: %v", err)
	}
}

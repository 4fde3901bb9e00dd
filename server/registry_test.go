package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// doJSON sends a native API request with a JSON body and returns the status and body.
func doJSON(ctx context.Context, t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func instanceURL(nd *servertest.Node, service, addr string) string {
	return fmt.Sprintf("http://%s/v1/namespaces/public/groups/%s/services/%s/instances/%s", nd.HTTPAddr, group, service, addr)
}

// Nodes started with different --metadata-max-bytes apply the same log to the same
// state: the flag only seeds the replicated setting, which every node then admits
// writes under, and the state machine applies only compiled-in ceilings.
func TestRegistry_NodeFlagsDoNotMakeReplicasDiverge(t *testing.T) {
	limits := map[string]int{"n1": 4096, "n2": 1024, "n3": 2048}
	c := servertest.New(t, 3, servertest.FastTimeouts(), func(cfg *server.Config) { cfg.MetadataMaxBytes = limits[cfg.NodeID] })
	c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	cl := c.Nodes[c.Followers()[0]].Client()
	var set api.SettingsResponse
	wait.For(t, 10*time.Second, "the first leader seeds the cluster settings from its flag", func() bool {
		var err error
		set, _, err = cl.Settings(ctx, client.QueryOptions{})
		return err == nil && set.ModifyIndex != 0
	})
	// The node that led first seeded its flag. Which node that was can change between
	// MustLeader and the seeding write when an election follows at once (the race
	// detector on a loaded machine), so the test takes the seeded value and checks it is
	// one node's flag; from then on that value, not any node's flag, is the limit.
	want := set.MetadataMaxBytes
	if want != limits["n1"] && want != limits["n2"] && want != limits["n3"] {
		t.Fatalf("settings %+v: the limit is no node's flag (%v)", set, limits)
	}
	// Metadata just under the seeded limit: admitted through every node, applied everywhere.
	blob := strings.Repeat("x", want-100)
	var last uint64
	for i, nd := range c.Nodes {
		status, body := doJSON(ctx, t, http.MethodPut, instanceURL(nd, "orders", fmt.Sprintf("127.0.0.%d:80", i+1)),
			fmt.Sprintf(`{"metadata":{"blob":%q}}`, blob))
		if status != http.StatusOK {
			t.Fatalf("register through %s: %d %s", nd.ID, status, body)
		}
		var res api.WriteResult
		_ = json.Unmarshal(body, &res)
		last = max(last, res.Index)
	}
	// Over the limit: refused through every node, whatever its own flag says.
	for _, nd := range c.Nodes {
		status, body := doJSON(ctx, t, http.MethodPut, instanceURL(nd, "orders", "127.0.0.9:80"),
			fmt.Sprintf(`{"metadata":{"blob":%q}}`, strings.Repeat("x", want+10)))
		if status != http.StatusBadRequest || !strings.Contains(string(body), `"field":"metadata"`) {
			t.Fatalf("over the limit through %s: %d %s", nd.ID, status, body)
		}
	}
	noErr(t, c.WaitApplied(ctx, last))
	// The replicas are compared at the same applied index: entries the leader writes on
	// its own (a state check after an election on a loaded machine) may reach the nodes
	// at different moments, so a comparison is retried until every node has applied the
	// same index; replicas that diverged never agree.
	var hashes map[string]string
	wait.For(t, 15*time.Second, "every replica at the same index with the same state", func() bool {
		hashes = map[string]string{}
		applied := map[uint64]bool{}
		for _, nd := range c.Nodes {
			st := dump(t, nd)
			if len(st.Instances) != 3 {
				t.Fatalf("%s holds %d instances, want 3", nd.ID, len(st.Instances))
			}
			applied[st.AppliedIndex] = true
			st.AppliedIndex = 0
			hashes[st.Hash()] = nd.ID
		}
		return len(applied) == 1
	})
	if len(hashes) != 1 {
		t.Fatalf("replicas diverged at the same applied index: %v", hashes)
	}
}

// A settings change is one Raft entry: every node has it, it survives a restart of the
// whole cluster, and a snapshot restore brings back the settings of the archive.
func TestRegistry_SettingsReplicateAndSurviveRestartAndRestore(t *testing.T) {
	c := newSnapshotCluster(t)
	ctx := ctxT(t, 90*time.Second)
	l := c.MustLeader()
	cl := c.Nodes[c.Followers()[0]].Client()
	idx, err := cl.UpdateSettings(ctx, api.SettingsRequest{MetadataMaxBytes: ptr(3000)})
	noErr(t, err)
	noErr(t, c.WaitApplied(ctx, idx))
	for _, nd := range c.Nodes {
		if st := dump(t, nd); st.Settings.MetadataMaxBytes != 3000 || st.Settings.ModifyIndex != idx {
			t.Fatalf("%s settings %+v, want 3000 at %d", nd.ID, st.Settings, idx)
		}
	}
	// Bad values change nothing and name the field.
	status, body := doJSON(ctx, t, http.MethodPut, "http://"+c.Nodes[l].HTTPAddr+"/v1/operator/settings", `{"metadataMaxBytes":0}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"field":"metadataMaxBytes"`) {
		t.Fatalf("bad settings: %d %s", status, body)
	}
	archive, _, _ := save(ctx, t, cl, false)

	for i := range c.Nodes {
		c.Stop(i)
	}
	for i := range c.Nodes {
		c.Start(i)
	}
	c.MustLeader()
	cl = c.Nodes[0].Client()
	got, _, err := cl.Settings(ctx, client.QueryOptions{})
	if err != nil || got.MetadataMaxBytes != 3000 || got.ModifyIndex != idx {
		t.Fatalf("after restart: %+v %v", got, err)
	}

	idx2, err := cl.UpdateSettings(ctx, api.SettingsRequest{MetadataMaxBytes: ptr(8000)})
	noErr(t, err)
	noErr(t, c.WaitApplied(ctx, idx2))
	noErr(t, cl.RestoreSnapshot(ctx, strings.NewReader(string(archive))))
	wait.For(t, 20*time.Second, "every node has the archive's settings", func() bool {
		for _, nd := range c.Nodes {
			if st := dump(t, nd); st.Settings.MetadataMaxBytes != 3000 {
				return false
			}
		}
		return true
	})
}

// ?cas=0 is create-if-absent decided in the state machine: of 20 concurrent PUTs
// exactly one succeeds; a stale ?cas=N is 409 cas_mismatch with the current index and
// writes nothing.
func TestRegistry_ConditionalWrites(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		nd := c.Nodes[i%len(c.Nodes)]
		wg.Go(func() {
			statuses[i], _ = doJSON(ctx, t, http.MethodPut, instanceURL(nd, "cas", "127.0.0.5:80")+"?cas=0",
				fmt.Sprintf(`{"weight":%d}`, i+1))
		})
	}
	wg.Wait()
	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	if counts[http.StatusOK] != 1 || counts[http.StatusConflict] != 19 {
		t.Fatalf("statuses %v, want one 200 and nineteen 409", counts)
	}
	cl := c.Nodes[0].Client()
	in, _, err := cl.Instance(ctx, "public", group, "cas", "127.0.0.5", 80, client.QueryOptions{})
	noErr(t, err)
	cur := in.Instance.ModifyIndex

	status, body := doJSON(ctx, t, http.MethodPatch, instanceURL(c.Nodes[1], "cas", "127.0.0.5:80")+fmt.Sprintf("?cas=%d", cur-1), `{"weight":77}`)
	var eb api.ErrorBody
	_ = json.Unmarshal(body, &eb)
	if status != http.StatusConflict || eb.Error.Code != api.CodeCASMismatch || eb.Error.Index == nil || *eb.Error.Index != cur {
		t.Fatalf("stale cas: %d %s, want 409 cas_mismatch with index %d", status, body, cur)
	}
	after, _, err := cl.Instance(ctx, "public", group, "cas", "127.0.0.5", 80, client.QueryOptions{})
	noErr(t, err)
	if after.Instance.Weight == 77 || after.Instance.ModifyIndex != cur {
		t.Fatalf("a refused conditional write changed the instance: %+v", after.Instance)
	}
	if status, body := doJSON(ctx, t, http.MethodPatch, instanceURL(c.Nodes[2], "cas", "127.0.0.5:80")+fmt.Sprintf("?cas=%d", cur), `{"weight":77}`); status != http.StatusOK {
		t.Fatalf("current cas: %d %s", status, body)
	}
	if status, body := doJSON(ctx, t, http.MethodDelete, instanceURL(c.Nodes[0], "cas", "127.0.0.5:80")+"?cas=x", ``); status != http.StatusBadRequest || !strings.Contains(string(body), `"field":"cas"`) {
		t.Fatalf("bad cas: %d %s", status, body)
	}
	// Services and clusters take the same condition.
	svc := fmt.Sprintf("http://%s/v1/namespaces/public/groups/%s/services/cas", c.Nodes[0].HTTPAddr, group)
	if status, _ := doJSON(ctx, t, http.MethodPut, svc+"?cas=0", `{}`); status != http.StatusConflict {
		t.Fatalf("create-if-absent of an existing service: %d", status)
	}
	if status, _ := doJSON(ctx, t, http.MethodPut, svc+"/clusters/fresh?cas=0", `{"healthCheck":{"type":"NONE"}}`); status != http.StatusOK {
		t.Fatalf("create-if-absent of a new cluster: %d", status)
	}
	if status, _ := doJSON(ctx, t, http.MethodPut, svc+"/clusters/fresh?cas=0", `{"healthCheck":{"type":"NONE"}}`); status != http.StatusConflict {
		t.Fatalf("create-if-absent of an existing cluster: %d", status)
	}
}

// Nacos's service create is create-if-absent inside the state machine: of concurrent
// creates through every node exactly one succeeds.
func TestRegistry_NacosConcurrentCreateOneWins(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	var wg sync.WaitGroup
	codes := make([]int, 12)
	for i := range codes {
		nd := c.Nodes[i%len(c.Nodes)]
		wg.Go(func() {
			form := url.Values{"serviceName": {"nacos-race"}, "protectThreshold": {fmt.Sprintf("0.%d", i%10)}}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+nd.HTTPAddr+"/nacos/v2/ns/service", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var env struct {
				Code int `json:"code"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&env)
			codes[i] = env.Code
		})
	}
	wg.Wait()
	counts := map[int]int{}
	for _, code := range codes {
		counts[code]++
	}
	if counts[0] != 1 || counts[21007] != len(codes)-1 {
		t.Fatalf("Nacos result codes %v, want one 0 and %d of 21007 (already exists)", counts, len(codes)-1)
	}
}

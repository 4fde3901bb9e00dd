package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// signalingReader reports each ServiceView call on a channel, so a test knows a
// blocking query has read (and registered its watches) before it changes the data.
type signalingReader struct {
	Reader
	viewed chan struct{}
}

func (r *signalingReader) ServiceView(ws *store.WatchSet, key model.ServiceKey) (uint64, store.ServiceView, error) {
	idx, v, err := r.Reader.ServiceView(ws, key)
	select {
	case r.viewed <- struct{}{}:
	default:
	}
	return idx, v, err
}

func (r *signalingReader) EncodedServiceView(ws *store.WatchSet, key model.ServiceKey, variant string, encode func(uint64, store.ServiceView) ([]byte, error)) (uint64, []byte, error) {
	idx, b, err := r.Reader.EncodedServiceView(ws, key, variant, encode)
	select {
	case r.viewed <- struct{}{}:
	default:
	}
	return idx, b, err
}

type blockingResult struct {
	resp    response
	elapsed time.Duration
}

// startRequest runs a request in the background.
func startRequest(t *testing.T, h http.Handler, path string) <-chan blockingResult {
	t.Helper()
	done := make(chan blockingResult, 1)
	start := time.Now()
	go func() {
		req := newRequest(t, http.MethodGet, path, nil)
		rec := newRecorder()
		h.ServeHTTP(rec, req)
		done <- blockingResult{response{Code: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}, time.Since(start)}
	}()
	return done
}

func awaitResult(t *testing.T, done <-chan blockingResult, within time.Duration) blockingResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(within):
		t.Fatalf("no answer within %s", within)
		return blockingResult{}
	}
}

// TestBlocking_ReturnsPromptlyOnChange checks a blocking query on the real store
// returns as soon as the service changes, with the new data and a higher index. The
// blocking read is served from the read cache (the first read filled it), so this is
// also the test that a watch on a cached view wakes.
func TestBlocking_ReturnsPromptlyOnChange(t *testing.T) {
	st := mustNewStore(t)
	reg := prometheus.NewRegistry()
	if err := st.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	node := newStoreNode(t, st)
	rd := &signalingReader{Reader: st, viewed: make(chan struct{}, 1)}
	h := mustNew(t, testConfig(node, rd))
	mustDo(t, h, http.MethodPut, instPath, `{}`, 200)
	resp := mustDo(t, h, http.MethodGet, svcPath+"/instances", nil, 200)
	<-rd.viewed
	idx, _ := strconv.ParseUint(resp.Header.Get(api.HeaderIndex), 10, 64)

	done := startRequest(t, h, fmt.Sprintf("%s/instances?index=%d&wait=30s", svcPath, idx))
	select {
	case <-rd.viewed:
	case r := <-done:
		t.Fatalf("returned without blocking: %d %s", r.resp.Code, r.resp.Body)
	}
	if hits := readCacheMetric(t, reg, "roster_read_cache_hits_total", "encoded"); hits != 1 {
		t.Fatalf("%v encoded hits, want 1: the blocking read did not hit the cache", hits)
	}
	mustDo(t, h, http.MethodPut, svcPath+"/instances/127.100.0.2:8080", `{}`, 200)
	r := awaitResult(t, done, 5*time.Second)
	if r.resp.Code != http.StatusOK {
		t.Fatalf("%d %s", r.resp.Code, r.resp.Body)
	}
	var out api.InstancesResponse
	r.resp.decode(t, &out)
	if out.Index <= idx || r.resp.Header.Get(api.HeaderIndex) != strconv.FormatUint(out.Index, 10) || len(out.Instances) != 2 {
		t.Fatalf("index %d (was %d), %d instances", out.Index, idx, len(out.Instances))
	}
}

// TestBlocking_ReturnsAtTheWait checks a blocking query without a change answers the
// current data once the wait (plus at most wait/16 of jitter) has passed.
func TestBlocking_ReturnsAtTheWait(t *testing.T) {
	h, _, _ := newStoreAPI(t)
	mustDo(t, h, http.MethodPut, instPath, `{}`, 200)
	resp := mustDo(t, h, http.MethodGet, svcPath+"/instances", nil, 200)
	idx := resp.Header.Get(api.HeaderIndex)

	const wait = 200 * time.Millisecond
	r := awaitResult(t, startRequest(t, h, svcPath+"/instances?index="+idx+"&wait=200ms"), 5*time.Second)
	if r.resp.Code != http.StatusOK || r.resp.Header.Get(api.HeaderIndex) != idx {
		t.Fatalf("%d index %q, want %s", r.resp.Code, r.resp.Header.Get(api.HeaderIndex), idx)
	}
	if r.elapsed < wait || r.elapsed > wait+wait/16+time.Second {
		t.Fatalf("answered after %s, wait %s", r.elapsed, wait)
	}
	var out api.InstancesResponse
	r.resp.decode(t, &out)
	if len(out.Instances) != 1 {
		t.Fatalf("%+v", out)
	}
}

// TestBlocking_StaleIndexReturnsAtOnce checks an index below the current one does not block.
func TestBlocking_StaleIndexReturnsAtOnce(t *testing.T) {
	h, _, _ := newStoreAPI(t)
	mustDo(t, h, http.MethodPut, instPath, `{}`, 200)
	r := awaitResult(t, startRequest(t, h, svcPath+"/instances?index=0&wait=1m"), 5*time.Second)
	if r.resp.Code != http.StatusOK || r.elapsed > 5*time.Second {
		t.Fatalf("%d after %s", r.resp.Code, r.elapsed)
	}
	// A missing service is a 404 at once, blocking or not.
	r = awaitResult(t, startRequest(t, h, "/v1/namespaces/public/groups/g/services/none/instances?index=99&wait=1m"), 5*time.Second)
	if r.resp.Code != http.StatusNotFound {
		t.Fatalf("%d", r.resp.Code)
	}
}

// TestBlocking_EveryReadRouteBlocks checks each read route waits for a change of what
// it read (fake reader: every read watches one channel).
func TestBlocking_EveryReadRouteBlocks(t *testing.T) {
	for _, path := range []string{
		"/v1/namespaces", "/v1/namespaces/public", "/v1/namespaces/public/services", svcPath,
		svcPath + "/clusters", svcPath + "/clusters/DEFAULT", svcPath + "/instances", instPath, "/v1/cluster/members",
	} {
		t.Run(path, func(t *testing.T) {
			rd := seededReader()
			h := mustNew(t, testConfig(newLeaderNode("n1"), rd))
			done := startRequest(t, h, path+"?index=10&wait=30s")
			deadline := time.Now().Add(5 * time.Second)
			for rd.readCount() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the query never read")
				}
				time.Sleep(time.Millisecond)
			}
			select {
			case r := <-done:
				t.Fatalf("returned without a change: %d %s", r.resp.Code, r.resp.Body)
			default:
			}
			rd.bump(nil)
			r := awaitResult(t, done, 5*time.Second)
			if r.resp.Code != http.StatusOK || r.resp.Header.Get(api.HeaderIndex) != "11" {
				t.Fatalf("%d index %q %s", r.resp.Code, r.resp.Header.Get(api.HeaderIndex), r.resp.Body)
			}
		})
	}
}

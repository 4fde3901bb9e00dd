package bench

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func fanoutTestConfig(target string, others ...string) FanoutConfig {
	return FanoutConfig{
		Endpoint: target, Others: others, Watchers: 40, Writes: 3, Instances: 3, PID: os.Getpid(),
		Baseline: 20 * time.Millisecond, Idle: 20 * time.Millisecond, ProbeEvery: 5 * time.Millisecond,
		WriteGap: -1, WriteTimeout: 20 * time.Second, OpenTimeout: 20 * time.Second, BufferSize: 64,
	}
}

func TestFanout_EverySubscriberSeesEveryWrite(t *testing.T) {
	for _, verify := range []bool{false, true} {
		st := newFakeStore()
		sc := newStreamCount()
		target := newFakeRosterSSE(t, st, fakeSSE{crlf: true, streams: sc})
		other := newFakeRoster(t, st)
		cfg := fanoutTestConfig(target.URL, other.URL)
		cfg.Verify = verify
		res, err := Fanout(testCtx(t), cfg)
		if err != nil {
			t.Fatalf("verify %v: %v", verify, err)
		}
		if res.Established != 40 || res.Writes != 3 || res.Deliveries != 120 || res.Missing != 0 || res.WriteErrors != 0 {
			t.Fatalf("verify %v: result %+v", verify, res)
		}
		if sc.total != 40 || res.Reconnects != 0 {
			t.Errorf("%d streams opened, %d reconnects: want one stream per subscriber", sc.total, res.Reconnects)
		}
		if n := st.count("bench-fanout"); n != 3 {
			t.Errorf("service holds %d instances", n)
		}
		for i, w := range res.PerWrite {
			if w.Missing != 0 || (i > 0 && w.Index <= res.PerWrite[i-1].Index) {
				t.Errorf("write %d: %+v", i, w)
			}
		}
		var names []string
		for _, p := range res.Phases {
			names = append(names, p.Name)
		}
		if !reflect.DeepEqual(names, []string{"baseline", "open", "idle", "writes"}) {
			t.Errorf("phases %v", names)
		}
		base := res.Phases[0]
		if base.Ready.Count == 0 || base.StaleRead.Count == 0 || base.Ready.Errors != 0 || base.StaleRead.Errors != 0 {
			t.Errorf("baseline samples %+v", base)
		}
		// The fake answers last contact 3 ms on ready and 2 ms on stale reads, for both nodes.
		if lc := base.LastContactMax[nodeName(target.URL)]; lc != 3 {
			t.Errorf("last contact of the target %v", base.LastContactMax)
		}
		if _, ok := base.LastContactMax[nodeName(other.URL)]; !ok {
			t.Errorf("no last contact of the other member: %v", base.LastContactMax)
		}
		if res.Server.RSSBeforeKiB <= 0 || res.Server.RSSIdleKiB <= 0 || res.Server.FDsIdle <= 0 || res.Client.PeakRSSKiB <= 0 {
			t.Errorf("process figures %+v", res.Server)
		}
		var out bytes.Buffer
		if err := WriteFanoutTable(&out, res); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"40 SSE subscribers", "write ack → received, per subscriber", "120", "baseline", "writes", "lc " + nodeName(other.URL)} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("table lacks %q:\n%s", want, out.String())
			}
		}
	}
}

// TestFanout_SubscribersResumeWithLastEventID runs against a server that ends every
// stream after one event: the subscribers reconnect with Last-Event-ID and still see every
// write.
func TestFanout_SubscribersResumeWithLastEventID(t *testing.T) {
	st := newFakeStore()
	sc := newStreamCount()
	target := newFakeRosterSSE(t, st, fakeSSE{maxEvents: 1, retry: 1, streams: sc})
	cfg := fanoutTestConfig(target.URL)
	cfg.Watchers, cfg.Writes = 10, 2
	res, err := Fanout(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deliveries != 20 || res.Missing != 0 || res.Reconnects == 0 {
		t.Fatalf("result %+v", res)
	}
	sc.mu.Lock()
	resumed := sc.resumed
	sc.mu.Unlock()
	if resumed == 0 {
		t.Error("no stream was resumed with Last-Event-ID")
	}
}

func TestFanout_FailsAtOnceWithoutSSE(t *testing.T) {
	st := newFakeStore()
	target := newFakeRosterSSE(t, st, fakeSSE{off: true})
	res, err := Fanout(testCtx(t), fanoutTestConfig(target.URL))
	if !errors.Is(err, errNoSSE) || !strings.Contains(err.Error(), "does not serve the SSE watch") {
		t.Fatalf("err %v", err)
	}
	if res == nil || res.Established != 0 {
		t.Fatalf("result %+v", res)
	}
}

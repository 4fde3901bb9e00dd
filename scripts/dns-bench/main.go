// Command dns-bench measures a Roster node's DNS interface: queries per second,
// latency percentiles, and the serving process's CPU per 10k queries per second.
//
// It sends one question (-name, -type) over UDP from -concurrency workers, each with
// one query in flight on its own socket, for -duration after -warmup, and stops after
// -count answers at most. Every answer's header is checked (id, rcode, answer count);
// every 64th answer is unpacked whole with miekg/dns and its records counted. Only
// loopback targets are accepted.
//
// With -http it first registers -setup instances (127.0.9.1, 127.0.9.2, ...) of the
// service in a NONE-checked cluster through the node's native API. With -pid it reads
// that process's CPU time from /proc/PID/stat over the window.
//
//	go run ./scripts/dns-bench -addr 127.0.0.1:8600 -http 127.0.0.1:8848 -setup 10 -pid $(pgrep -f 'roster dev')
//
// scripts/bench-dns.sh runs it against `roster dev` pinned to one core.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/procstat"
	"github.com/rosterhq/roster/model"
)

func main() {
	var (
		addr     = flag.String("addr", "127.0.0.1:8600", "DNS address of the node (loopback only)")
		httpAddr = flag.String("http", "", "HTTP API of the node, to register the instances first (empty: register nothing)")
		setup    = flag.Int("setup", 10, "instances to register with -http")
		name     = flag.String("name", "bench.svc.roster.", "name asked")
		qtype    = flag.String("type", "A", "query type asked")
		conc     = flag.Int("concurrency", 16, "workers, each with one query in flight")
		duration = flag.Duration("duration", 10*time.Second, "measurement window (at most 5m)")
		warmup   = flag.Duration("warmup", 2*time.Second, "load before the window opens")
		count    = flag.Int("count", 5_000_000, "stop after this many answers in the window")
		pid      = flag.Int("pid", 0, "process whose CPU is measured over the window (0: none)")
		timeout  = flag.Duration("timeout", time.Second, "per-query timeout")
	)
	flag.Parse()
	if err := run(*addr, *httpAddr, *setup, *name, *qtype, *conc, *duration, *warmup, *count, *pid, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "dns-bench:", err)
		os.Exit(1)
	}
}

func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Unmap().IsLoopback() {
		return fmt.Errorf("%s is not a loopback IP address: this tool only loads this machine", addr)
	}
	return nil
}

func run(addr, httpAddr string, setup int, name, qtype string, conc int, duration, warmup time.Duration, count, pid int, timeout time.Duration) error {
	if err := loopbackOnly(addr); err != nil {
		return err
	}
	if duration <= 0 || duration > 5*time.Minute || warmup < 0 || warmup > time.Minute || conc < 1 || conc > 1024 || count < 1 {
		return errors.New("bounds: 0 < duration ≤ 5m, 0 ≤ warmup ≤ 1m, 1 ≤ concurrency ≤ 1024, count ≥ 1")
	}
	t, ok := dns.StringToType[strings.ToUpper(qtype)]
	if !ok {
		return fmt.Errorf("unknown query type %q", qtype)
	}
	want := -1 // answer records expected; -1: not checked
	if httpAddr != "" {
		if err := loopbackOnly(httpAddr); err != nil {
			return err
		}
		if err := register(httpAddr, name, setup); err != nil {
			return err
		}
		if t == dns.TypeA || t == dns.TypeSRV {
			want = setup
		}
	}
	q := new(dns.Msg).SetQuestion(dns.Fqdn(name), t)
	q.RecursionDesired = false
	wire, err := q.Pack()
	if err != nil {
		return err
	}
	if want >= 0 {
		if err := waitAnswers(addr, wire, want, 10*time.Second); err != nil {
			return err
		}
	}

	fmt.Printf("dns-bench: %s %s at %s, %d workers, warm-up %s, window %s; GOMAXPROCS=%d NumCPU=%d %s\n",
		dns.TypeToString[t], q.Question[0].Name, addr, conc, warmup, duration, runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.Version())

	var (
		measuring atomic.Bool
		answered  atomic.Int64
		failures  atomic.Int64
		stop      = make(chan struct{})
		wg        sync.WaitGroup
		lat       = make([][]time.Duration, conc)
		firstErr  atomic.Value
	)
	ctx, cancel := context.WithTimeout(context.Background(), warmup+duration+30*time.Second)
	defer cancel()
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := worker(ctx, addr, wire, want, timeout, stop, &measuring, &answered, &failures, int64(count), &lat[w]); err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
		}()
	}
	time.Sleep(warmup)
	cpu0, cpuErr := procCPU(pid)
	self0 := selfCPU()
	start := time.Now()
	measuring.Store(true)
	deadline := time.NewTimer(duration)
	tick := time.NewTicker(10 * time.Millisecond)
wait:
	for {
		select {
		case <-deadline.C:
			break wait
		case <-tick.C:
			if answered.Load() >= int64(count) {
				break wait
			}
		}
	}
	measuring.Store(false)
	wall := time.Since(start)
	cpu1, _ := procCPU(pid)
	self1 := selfCPU()
	close(stop)
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return e.(error)
	}

	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	n := len(all)
	qps := float64(n) / wall.Seconds()
	fmt.Printf("answers %d in %s: %.0f queries/s; failures (timeouts, bad answers) %d\n", n, wall.Round(time.Millisecond), qps, failures.Load())
	if n > 0 {
		fmt.Printf("latency p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
			pct(all, 0.50), pct(all, 0.90), pct(all, 0.99), pct(all, 0.999), all[n-1])
	}
	fmt.Printf("load generator CPU: %.2f cores\n", (self1-self0).Seconds()/wall.Seconds())
	if pid != 0 {
		if cpuErr != nil {
			return cpuErr
		}
		cores := (cpu1 - cpu0).Seconds() / wall.Seconds()
		fmt.Printf("server (pid %d) CPU: %.3f cores; %.3f cores per 10k queries/s\n", pid, cores, cores/(qps/10000))
	}
	return nil
}

// worker sends the query, waits for its answer, and records the latency while measuring.
func worker(ctx context.Context, addr string, wire []byte, want int, timeout time.Duration, stop <-chan struct{},
	measuring *atomic.Bool, answered, failures *atomic.Int64, count int64, lat *[]time.Duration) error {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	req := slices.Clone(wire)
	buf := make([]byte, 65535)
	id := uint16(os.Getpid())
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		id++
		binary.BigEndian.PutUint16(req, id)
		sent := time.Now()
		if _, err := conn.Write(req); err != nil {
			return err
		}
		_ = conn.SetReadDeadline(sent.Add(timeout))
		ok := false
		for {
			n, err := conn.Read(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				return err
			}
			if n < 12 || binary.BigEndian.Uint16(buf) != id {
				continue // a late answer to an earlier, timed-out query
			}
			ok = checkAnswer(buf[:n], want, i%64 == 0)
			break
		}
		el := time.Since(sent)
		if !measuring.Load() {
			continue
		}
		if !ok {
			failures.Add(1)
			continue
		}
		if answered.Add(1) <= count {
			*lat = append(*lat, el)
		}
	}
}

// checkAnswer checks the header (a response, NOERROR, not truncated, want answers)
// and, when full, unpacks the whole message.
func checkAnswer(b []byte, want int, full bool) bool {
	flags := binary.BigEndian.Uint16(b[2:])
	if flags&(1<<15) == 0 || flags&0xF != dns.RcodeSuccess || flags&(1<<9) != 0 {
		return false
	}
	if want >= 0 && int(binary.BigEndian.Uint16(b[6:])) != want {
		return false
	}
	if full {
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil || (want >= 0 && len(m.Answer) != want) {
			return false
		}
	}
	return true
}

// waitAnswers waits until the node answers the query with want records.
func waitAnswers(addr string, wire []byte, want int, limit time.Duration) error {
	q := new(dns.Msg)
	if err := q.Unpack(wire); err != nil {
		return err
	}
	c := &dns.Client{Net: "udp", Timeout: time.Second}
	deadline := time.Now().Add(limit)
	for {
		r, _, err := c.Exchange(q, addr)
		if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == want {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("rcode %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
			}
			return fmt.Errorf("the node does not answer %s with %d records: %v", q.Question[0].Name, want, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// register puts setup instances of the service the short name denotes
// (<service>.svc.<domain>) into a NONE-checked cluster.
func register(httpAddr, name string, setup int) error {
	svc, _, _ := strings.Cut(name, ".")
	if svc == "" || setup < 1 || setup > 250 {
		return errors.New("-setup needs a short service name (<service>.svc.<domain>) and 1..250 instances")
	}
	c := client.New(httpAddr, client.WithTimeout(5*time.Second))
	ctx := context.Background()
	ns, group := model.DefaultNamespace, model.DefaultGroup
	if _, err := c.UpsertCluster(ctx, ns, group, svc, model.DefaultCluster, api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}); err != nil {
		return fmt.Errorf("create the NONE cluster: %w", err)
	}
	for i := 1; i <= setup; i++ {
		w := float64(i)
		if _, err := c.RegisterInstance(ctx, ns, group, svc, "127.0.9."+strconv.Itoa(i), 5432, api.InstanceRequest{Weight: &w}); err != nil {
			return fmt.Errorf("register: %w", err)
		}
	}
	return nil
}

// procCPU is the user+system CPU time of process pid (0 when there is no such process
// to measure).
func procCPU(pid int) (time.Duration, error) {
	if pid == 0 {
		return 0, nil
	}
	return procstat.CPUTime(pid)
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(p * float64(len(sorted)-1))
	return sorted[i].Round(time.Microsecond)
}

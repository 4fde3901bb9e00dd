package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Latency summarises a histogram in milliseconds.
type Latency struct {
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

// Summarize returns h's percentiles in milliseconds.
func Summarize(h *Histogram) Latency {
	return Latency{
		P50:  ms(h.Percentile(0.50)),
		P90:  ms(h.Percentile(0.90)),
		P99:  ms(h.Percentile(0.99)),
		Max:  ms(h.Max()),
		Mean: ms(h.Mean()),
	}
}

// Result is one measured point: a workload configuration at one concurrency against one
// system.
type Result struct {
	System      string `json:"system"`
	Workload    string `json:"workload"`
	Consistency string `json:"consistency,omitempty"`
	Instances   int    `json:"instances,omitempty"`
	// ReadTarget is TargetAll when the reads or watches of the point were spread over
	// every member (empty when they went to the leader).
	ReadTarget string `json:"read_target,omitempty"`
	// WatchTransport is how Roster's watchers followed the service (WatchSSE or
	// WatchBlocking); empty for other workloads and for etcd, whose watch is a stream.
	WatchTransport string    `json:"watch_transport,omitempty"`
	Concurrency    int       `json:"concurrency"`
	Label          string    `json:"label,omitempty"`
	Started        time.Time `json:"started"`
	// WindowSeconds is the measured window (shorter than asked when Exhausted).
	WindowSeconds float64 `json:"window_s"`
	Requests      uint64  `json:"requests"`
	Errors        uint64  `json:"errors"`
	RPS           float64 `json:"rps"`
	Latency       Latency `json:"latency"`
	// ServerCPU is the CPU used by the measured cluster processes over the window, in
	// cores; -1 when no processes were given.
	ServerCPU float64 `json:"server_cpu_cores"`
	// ClientCPU is the CPU used by the load generator itself over the window, in cores.
	ClientCPU float64 `json:"client_cpu_cores"`
	// OtherCPU is the CPU used by everything else on the machine over the window, in cores
	// (machine busy time minus ServerCPU and ClientCPU); -1 when ServerCPU is unknown. A
	// high value means the point was disturbed by other work.
	OtherCPU     float64            `json:"other_cpu_cores"`
	Exhausted    bool               `json:"exhausted,omitempty"`
	ErrorSamples []string           `json:"error_samples,omitempty"`
	Extra        map[string]float64 `json:"extra,omitempty"`
}

// PointName names the workload configuration of r, such as "read-10 linearizable",
// "register", "watch stale all" (reads spread over every member) or, for Roster's
// watchers, "watch stale all sse" and "watch stale all blocking" (a Roster watch result
// without a transport, from before there were two, was a blocking one); results of two
// systems with the same BasePointName and concurrency are comparable.
func (r Result) PointName() string {
	name := r.BasePointName()
	if r.System == SystemRoster && r.Workload == WorkloadWatch {
		t := r.WatchTransport
		if t == "" {
			t = WatchBlocking
		}
		name += " " + t
	}
	return name
}

// BasePointName is PointName without Roster's watch transport: the name under which
// etcd's result of the same configuration is found.
func (r Result) BasePointName() string {
	name := r.Workload
	if r.Workload == WorkloadRead {
		name = fmt.Sprintf("read-%d", r.Instances)
	}
	if r.Consistency != "" {
		name += " " + r.Consistency
	}
	if r.ReadTarget == TargetAll {
		name += " all"
	}
	return name
}

// Meta describes where and how a report was produced.
type Meta struct {
	Tool      string    `json:"tool"`
	GoVersion string    `json:"go_version"`
	NumCPU    int       `json:"num_cpu"`
	Hostname  string    `json:"hostname"`
	Started   time.Time `json:"started"`
	Args      []string  `json:"args,omitempty"`
	// SystemVersion is the server version when it could be asked (etcd's /version).
	SystemVersion string `json:"system_version,omitempty"`
}

// NewMeta fills Meta from the running process.
func NewMeta(args []string) Meta {
	h, _ := os.Hostname()
	return Meta{Tool: "roster-bench", GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(), Hostname: h, Started: time.Now(), Args: args}
}

// Report is the JSON document written by the bench: metadata and every point.
type Report struct {
	Meta    Meta     `json:"meta"`
	Results []Result `json:"results"`
}

// WriteJSON writes rep as indented JSON.
func WriteJSON(w io.Writer, rep Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// ReadReport parses a report written by WriteJSON.
func ReadReport(r io.Reader) (Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return Report{}, fmt.Errorf("bench: read report: %w", err)
	}
	return rep, nil
}

// fmtFloat prints a number with precision suited to its size.
func fmtFloat(v float64) string {
	switch {
	case v < 0:
		return "-"
	case v == 0:
		return "0"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// WriteTable writes results as an aligned text table, one row per point: system,
// point, concurrency, requests/s, p50/p90/p99/max latency (ms), errors, server and
// client CPU and the CPU of everything else on the machine (cores). Points cut short by exhaustion are marked with "*".
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tpoint\tconc\treq/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\terrors\tsrv cpu\tcli cpu\tother cpu\t")
	for _, r := range rs {
		mark := ""
		if r.Exhausted {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n",
			r.System, r.PointName(), r.Concurrency, fmtFloat(r.RPS), mark,
			fmtFloat(r.Latency.P50), fmtFloat(r.Latency.P90), fmtFloat(r.Latency.P99), fmtFloat(r.Latency.Max),
			r.Errors, fmtFloat(r.ServerCPU), fmtFloat(r.ClientCPU), fmtFloat(r.OtherCPU))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var notes []string
	for _, r := range rs {
		if len(r.ErrorSamples) > 0 {
			notes = append(notes, fmt.Sprintf("%s %s c=%d errors: %s", r.System, r.PointName(), r.Concurrency, strings.Join(r.ErrorSamples, "; ")))
		}
		if len(r.Extra) > 0 {
			keys := make([]string, 0, len(r.Extra))
			for k := range r.Extra {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, 0, len(keys))
			for _, k := range keys {
				parts = append(parts, k+"="+fmtFloat(r.Extra[k]))
			}
			notes = append(notes, fmt.Sprintf("%s %s c=%d: %s", r.System, r.PointName(), r.Concurrency, strings.Join(parts, " ")))
		}
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, "  "+n); err != nil {
			return err
		}
	}
	return nil
}

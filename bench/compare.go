package bench

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
)

// Summary is the median over rounds of one system at one point.
type Summary struct {
	Rounds    int     `json:"rounds"`
	RPS       float64 `json:"rps"`
	P50       float64 `json:"p50_ms"`
	P99       float64 `json:"p99_ms"`
	Max       float64 `json:"max_ms"`
	Errors    uint64  `json:"errors"`
	ServerCPU float64 `json:"server_cpu_cores"`
	ClientCPU float64 `json:"client_cpu_cores"`
	// OtherCPU is the median CPU of everything else on the machine (-1 when unknown).
	OtherCPU float64 `json:"other_cpu_cores"`
	// RPSPerCore is RPS divided by ServerCPU (0 when the CPU is unknown).
	RPSPerCore float64 `json:"rps_per_core"`
}

// ComparedPoint pairs the two systems at one point. Ratios are Roster/etcd: above 1
// means Roster serves more (RPS, RPSPerCore) or is slower (P50, P99).
type ComparedPoint struct {
	Point string `json:"point"`
	// BasePoint is the configuration's name without Roster's watch transport, when it
	// differs from Point (etcd's result is the one of that name).
	BasePoint   string   `json:"base_point,omitempty"`
	Concurrency int      `json:"concurrency"`
	Roster      *Summary `json:"roster,omitempty"`
	Etcd        *Summary `json:"etcd,omitempty"`
	RPSRatio    float64  `json:"rps_ratio,omitempty"`
	P50Ratio    float64  `json:"p50_ratio,omitempty"`
	P99Ratio    float64  `json:"p99_ratio,omitempty"`
	// EfficiencyRatio compares requests per server core.
	EfficiencyRatio float64 `json:"efficiency_ratio,omitempty"`
}

// Comparison is the JSON document written by `roster bench compare`.
type Comparison struct {
	Metas  []Meta          `json:"metas"`
	Points []ComparedPoint `json:"points"`
	Raw    []Result        `json:"raw"`
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func summarize(rs []Result) *Summary {
	if len(rs) == 0 {
		return nil
	}
	var rps, p50, p99, mx, scpu, ccpu, ocpu []float64
	s := &Summary{Rounds: len(rs)}
	cpuKnown := true
	for _, r := range rs {
		rps = append(rps, r.RPS)
		p50 = append(p50, r.Latency.P50)
		p99 = append(p99, r.Latency.P99)
		mx = append(mx, r.Latency.Max)
		scpu = append(scpu, r.ServerCPU)
		ccpu = append(ccpu, r.ClientCPU)
		ocpu = append(ocpu, r.OtherCPU)
		s.Errors += r.Errors
		if r.ServerCPU < 0 {
			cpuKnown = false
		}
	}
	s.RPS, s.P50, s.P99, s.Max = median(rps), median(p50), median(p99), median(mx)
	s.ClientCPU = median(ccpu)
	s.ServerCPU, s.OtherCPU = -1, -1
	if cpuKnown {
		s.ServerCPU, s.OtherCPU = median(scpu), median(ocpu)
		if s.ServerCPU > 0 {
			s.RPSPerCore = s.RPS / s.ServerCPU
		}
	}
	return s
}

func ratio(a, b float64) float64 {
	if b <= 0 || a < 0 {
		return 0
	}
	return a / b
}

// Compare groups the results of every report by point and concurrency, takes each
// system's median over rounds and computes Roster/etcd ratios. Points keep the order in
// which they first appear. etcd's result of a configuration is compared with every Roster
// result of the same BasePointName: each Roster watch transport ("watch stale all sse",
// "watch stale all blocking") gets a row against etcd's "watch stale all", at the place
// where that configuration first appeared.
func Compare(reps []Report) Comparison {
	type key struct {
		point string
		conc  int
	}
	var (
		order    []key                // rows (Roster point names, or etcd's base names) in order of appearance
		baseOf   = map[key]key{}      // row → its base
		roster   = map[key][]Result{} // row → Roster results
		etcd     = map[key][]Result{} // base → etcd results
		variants = map[key][]key{}    // base → Roster rows of that base, in order
		cmp      Comparison
	)
	addRow := func(row, base key) {
		if _, ok := baseOf[row]; ok {
			return
		}
		baseOf[row] = base
		order = append(order, row)
	}
	for _, rep := range reps {
		cmp.Metas = append(cmp.Metas, rep.Meta)
		for _, r := range rep.Results {
			cmp.Raw = append(cmp.Raw, r)
			base := key{r.BasePointName(), r.Concurrency}
			switch r.System {
			case SystemEtcd:
				addRow(base, base)
				etcd[base] = append(etcd[base], r)
			default:
				row := key{r.PointName(), r.Concurrency}
				if _, ok := baseOf[row]; !ok {
					variants[base] = append(variants[base], row)
				}
				addRow(row, base)
				roster[row] = append(roster[row], r)
			}
		}
	}
	done := map[key]bool{}
	emit := func(row key) {
		if done[row] {
			return
		}
		done[row] = true
		base := baseOf[row]
		p := ComparedPoint{Point: row.point, Concurrency: row.conc,
			Roster: summarize(roster[row]), Etcd: summarize(etcd[base])}
		if base.point != row.point {
			p.BasePoint = base.point
		}
		if p.Roster != nil && p.Etcd != nil {
			p.RPSRatio = ratio(p.Roster.RPS, p.Etcd.RPS)
			p.P50Ratio = ratio(p.Roster.P50, p.Etcd.P50)
			p.P99Ratio = ratio(p.Roster.P99, p.Etcd.P99)
			p.EfficiencyRatio = ratio(p.Roster.RPSPerCore, p.Etcd.RPSPerCore)
		}
		cmp.Points = append(cmp.Points, p)
	}
	for _, row := range order {
		if base := baseOf[row]; base == row && len(roster[row]) == 0 && len(variants[base]) > 0 {
			// etcd's configuration, first seen before Roster's: Roster's variants go here.
			for _, v := range variants[base] {
				emit(v)
			}
			continue
		}
		emit(row)
	}
	return cmp
}

// WriteComparison prints one row per point: each system's median requests/s, p50 and
// p99 (ms), server CPU (cores), errors and the CPU of other work on the machine, then
// the Roster/etcd ratios of requests/s, p99 and requests per server core.
func WriteComparison(w io.Writer, cmp Comparison) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "point\tconc\t|\troster req/s\tp50\tp99\tcpu\terr\tother\t|\tetcd req/s\tp50\tp99\tcpu\terr\tother\t|\treq/s R/E\tp99 R/E\treq/core R/E\t")
	cols := func(s *Summary) string {
		if s == nil {
			return "-\t-\t-\t-\t-\t-"
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s", fmtFloat(s.RPS), fmtFloat(s.P50), fmtFloat(s.P99), fmtFloat(s.ServerCPU), s.Errors, fmtFloat(s.OtherCPU))
	}
	rat := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", v)
	}
	for _, p := range cmp.Points {
		fmt.Fprintf(tw, "%s\t%d\t|\t%s\t|\t%s\t|\t%s\t%s\t%s\t\n", p.Point, p.Concurrency, cols(p.Roster), cols(p.Etcd),
			rat(p.RPSRatio), rat(p.P99Ratio), rat(p.EfficiencyRatio))
	}
	return tw.Flush()
}

package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// fmtKiB prints a size in KiB as KiB or MiB; "-" when unknown.
func fmtKiB(v int64) string {
	switch {
	case v < 0:
		return "-"
	case v < 10*1024:
		return fmt.Sprintf("%d KiB", v)
	default:
		return fmt.Sprintf("%.1f MiB", float64(v)/1024)
	}
}

func fmtCount(v int) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

// WriteFanoutTable prints a fan-out result: the subscribers, memory, the delivery
// latencies and the side client's samples per phase.
func WriteFanoutTable(w io.Writer, r *FanoutResult) error {
	role := "the leader"
	if r.Role != "leader" {
		role = "a follower; the leader is " + nodeName(r.Leader)
	}
	fmt.Fprintf(w, "fan-out: %d SSE subscribers on %s (%s), service %s of %d instances\n",
		r.Watchers, nodeName(r.Endpoint), role, r.Service, r.Instances)
	fmt.Fprintf(w, "open: %d of %d got their first event in %.2f s; %d reconnects\n\n", r.Established, r.Watchers, r.OpenSeconds, r.Reconnects)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "process\tpid\tRSS before\tidle\tafter writes\tpeak\tper subscriber\topen files\tgoroutines\t")
	row := func(name string, p FanoutProcess, per float64) {
		perS := "-"
		if p.RSSBeforeKiB >= 0 && p.RSSIdleKiB >= 0 && r.Watchers > 0 {
			perS = fmt.Sprintf("%.1f KiB", per)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s → %s\t%s → %s\t\n", name, fmtCount(p.PID),
			fmtKiB(p.RSSBeforeKiB), fmtKiB(p.RSSIdleKiB), fmtKiB(p.RSSAfterKiB), fmtKiB(p.PeakRSSKiB), perS,
			fmtCount(p.FDsBefore), fmtCount(p.FDsIdle), fmtCount(p.GoroutinesBefore), fmtCount(p.GoroutinesIdle))
	}
	row("server", r.Server, r.RSSPerWatcherKiB)
	row("client", r.Client, r.ClientRSSPerWatcherKiB)
	if err := tw.Flush(); err != nil {
		return err
	}

	if r.Established == r.Watchers {
		if err := writeFanoutDeliveries(w, r); err != nil {
			return err
		}
	}
	return writeFanoutPhases(w, r)
}

// writeFanoutDeliveries prints the writes and their delivery latencies.
func writeFanoutDeliveries(w io.Writer, r *FanoutResult) error {
	fmt.Fprintf(w, "\nwrites: %d (%d failed), one at a time; %d deliveries, %d missing, %d received before the write's ack\n",
		r.Writes, r.WriteErrors, r.Deliveries, r.Missing, r.BeforeAck)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency (ms)\tcount\tp50\tp90\tp99\tmax\t")
	lat := func(name string, n uint64, l Latency) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", name, n, fmtFloat(l.P50), fmtFloat(l.P90), fmtFloat(l.P99), fmtFloat(l.Max))
	}
	lat("write issue → ack", uint64(r.Writes), r.WriteAck)
	lat("write ack → received, per subscriber", r.Deliveries, r.DeliveryAfterAck)
	lat("write issue → received, per subscriber", r.Deliveries, r.DeliveryAfterStart)
	var allSeen uint64
	for _, pw := range r.PerWrite {
		if pw.Missing == 0 {
			allSeen++
		}
	}
	lat("write ack → last subscriber, per write", allSeen, r.AllSeenAfterAck)
	return tw.Flush()
}

// writeFanoutPhases prints the side client's samples per phase and the errors seen.
func writeFanoutPhases(w io.Writer, r *FanoutResult) error {
	nodes := map[string]bool{}
	for _, p := range r.Phases {
		for n := range p.LastContactMax {
			nodes[n] = true
		}
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "\nside client on %s every %.0f ms: GET /v1/status/ready and a stale read of %s (latency ms);\n",
		nodeName(r.Endpoint), r.ProbeEveryMS, r.Service)
	fmt.Fprintf(w, "Raft last contact of each member (max ms, and samples above the %.0f ms heartbeat interval)\n", r.HeartbeatIntervalMS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := "phase\ts\tready n\tp50\tp99\tmax\terr\t|\tstale n\tp50\tp99\tmax\terr\t|"
	for _, n := range names {
		hdr += "\tlc " + n + "\t"
	}
	fmt.Fprintln(tw, hdr+"|\tsrv cpu\tcli cpu\t")
	for _, p := range r.Phases {
		var b strings.Builder
		fmt.Fprintf(&b, "%s\t%.2f\t%d\t%s\t%s\t%s\t%d\t|\t%d\t%s\t%s\t%s\t%d\t|", p.Name, p.Seconds,
			p.Ready.Count, fmtFloat(p.Ready.Latency.P50), fmtFloat(p.Ready.Latency.P99), fmtFloat(p.Ready.Latency.Max), p.Ready.Errors,
			p.StaleRead.Count, fmtFloat(p.StaleRead.Latency.P50), fmtFloat(p.StaleRead.Latency.P99), fmtFloat(p.StaleRead.Latency.Max), p.StaleRead.Errors)
		for _, n := range names {
			if v, ok := p.LastContactMax[n]; ok {
				fmt.Fprintf(&b, "\t%.0f (%d)\t", v, p.LateContacts[n])
			} else {
				b.WriteString("\t-\t")
			}
		}
		fmt.Fprintf(&b, "|\t%s\t%s\t", fmtFloat(p.ServerCPU), fmtFloat(p.ClientCPU))
		fmt.Fprintln(tw, b.String())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range r.Phases {
		for _, e := range []struct {
			what string
			s    ProbeStats
		}{{"ready", p.Ready}, {"stale read", p.StaleRead}} {
			if e.s.Errors > 0 {
				fmt.Fprintf(w, "  %s: %d %s errors, last: %s\n", p.Name, e.s.Errors, e.what, e.s.LastError)
			}
		}
	}
	for _, e := range r.ErrorSamples {
		fmt.Fprintf(w, "  subscriber error: %s\n", e)
	}
	return nil
}

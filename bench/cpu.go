package bench

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// atClkTck is the auxiliary-vector key of the kernel's clock-tick rate (sysconf(_SC_CLK_TCK)).
const atClkTck = 17

// ClockTicks returns the rate (per second) in which /proc/PID/stat reports CPU times,
// read from /proc/self/auxv; it falls back to 100, the value on every common Linux build.
func ClockTicks() int64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	for i := 0; i+16 <= len(b); i += 16 {
		k := binary.NativeEndian.Uint64(b[i:])
		v := binary.NativeEndian.Uint64(b[i+8:])
		if k == atClkTck && v > 0 {
			return int64(v)
		}
		if k == 0 {
			break
		}
	}
	return 100
}

// ProcCPUTicks returns utime+stime of process pid in clock ticks, from /proc/PID/stat.
func ProcCPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatTicks(string(b))
}

// parseStatTicks extracts utime (field 14) + stime (field 15) from a /proc/PID/stat line.
// The command name (field 2) is parenthesised and may hold spaces, so fields are counted
// after its closing parenthesis.
func parseStatTicks(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: malformed stat line")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14 → f[11], stime field 15 → f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: stat line has %d fields after the name", len(f))
	}
	u, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: utime: %w", err)
	}
	s, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: stime: %w", err)
	}
	return u + s, nil
}

// CPUMeter measures the CPU used by a set of processes over the measurement window, in
// cores (CPU seconds per wall second). It implements WindowObserver. A process that
// exits during the window contributes what it used until its last sample.
type CPUMeter struct {
	pids  []int
	ticks int64

	mu     sync.Mutex
	start  time.Time
	before map[int]int64
	cores  float64
	err    error
}

// NewCPUMeter returns a meter for pids (0 means this process itself).
func NewCPUMeter(pids []int) *CPUMeter {
	return &CPUMeter{pids: pids, ticks: ClockTicks()}
}

func (m *CPUMeter) sample() (map[int]int64, error) {
	out := make(map[int]int64, len(m.pids))
	for _, p := range m.pids {
		pid := p
		if pid == 0 {
			pid = os.Getpid()
		}
		t, err := ProcCPUTicks(pid)
		if err != nil {
			return out, err
		}
		out[p] = t
	}
	return out, nil
}

// WindowStart records the processes' CPU times at the start of the window.
func (m *CPUMeter) WindowStart(time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start = time.Now()
	m.before, m.err = m.sample()
}

// WindowEnd records the CPU times at the end and computes Cores.
func (m *CPUMeter) WindowEnd(time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	wall := time.Since(m.start)
	after, err := m.sample()
	if m.err == nil {
		m.err = err
	}
	var used int64
	for p, a := range after {
		if b, ok := m.before[p]; ok {
			used += a - b
		}
	}
	if wall > 0 {
		m.cores = float64(used) / float64(m.ticks) / wall.Seconds()
	}
}

// Cores is the CPU used over the last window, in cores; err reports a process that
// could not be read.
func (m *CPUMeter) Cores() (float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cores, m.err
}

// MachineCPUTicks returns the busy time of all CPUs (user, nice, system, irq, softirq,
// steal) in clock ticks, from the first line of /proc/stat.
func MachineCPUTicks() (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseMachineTicks(line)
}

// parseMachineTicks sums the busy fields of a /proc/stat "cpu" line: user nice system
// idle iowait irq softirq steal ... (idle and iowait are not busy).
func parseMachineTicks(line string) (int64, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("bench: malformed /proc/stat line %q", line)
	}
	var sum int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: /proc/stat field %d: %w", i, err)
		}
		sum += v
	}
	return sum, nil
}

// MachineMeter measures the busy CPU of the whole machine over the measurement window, in
// cores. It implements WindowObserver. Subtracting the cluster's and the bench's own CPU
// leaves the load of everything else, which tells whether a point was disturbed.
type MachineMeter struct {
	ticks int64

	mu     sync.Mutex
	start  time.Time
	before int64
	cores  float64
	err    error
}

// NewMachineMeter returns a meter of the machine's busy CPU.
func NewMachineMeter() *MachineMeter { return &MachineMeter{ticks: ClockTicks()} }

// WindowStart samples the machine's busy time.
func (m *MachineMeter) WindowStart(time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start = time.Now()
	m.before, m.err = MachineCPUTicks()
}

// WindowEnd samples again and computes Cores.
func (m *MachineMeter) WindowEnd(time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	wall := time.Since(m.start)
	after, err := MachineCPUTicks()
	if m.err == nil {
		m.err = err
	}
	if wall > 0 && m.err == nil {
		m.cores = float64(after-m.before) / float64(m.ticks) / wall.Seconds()
	}
}

// Cores is the machine's busy CPU over the last window, in cores.
func (m *MachineMeter) Cores() (float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cores, m.err
}

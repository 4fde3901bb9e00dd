package bench

import (
	"sync"
	"time"

	"github.com/rosterhq/roster/internal/procstat"
)

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
	return &CPUMeter{pids: pids, ticks: procstat.ClockTicks()}
}

func (m *CPUMeter) sample() (map[int]int64, error) {
	out := make(map[int]int64, len(m.pids))
	for _, p := range m.pids {
		t, err := procstat.CPUTicks(p)
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
func NewMachineMeter() *MachineMeter { return &MachineMeter{ticks: procstat.ClockTicks()} }

// WindowStart samples the machine's busy time.
func (m *MachineMeter) WindowStart(time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start = time.Now()
	m.before, m.err = procstat.MachineCPUTicks()
}

// WindowEnd samples again and computes Cores.
func (m *MachineMeter) WindowEnd(time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	wall := time.Since(m.start)
	after, err := procstat.MachineCPUTicks()
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

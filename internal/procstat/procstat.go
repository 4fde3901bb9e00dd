// Package procstat reads what Linux's /proc says of a process and of the machine: CPU
// time (/proc/PID/stat, /proc/stat), memory (/proc/PID/status), open files
// (/proc/PID/fd, /proc/PID/limits). It is the one reader of those files for the
// benchmarks and their scripts; pid 0 means this process everywhere.
package procstat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// path is the /proc file name of pid (0: this process).
func path(pid int, name string) string {
	if pid == 0 {
		return "/proc/self/" + name
	}
	return "/proc/" + strconv.Itoa(pid) + "/" + name
}

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

// CPUTicks returns utime+stime of process pid in clock ticks, from /proc/PID/stat.
func CPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile(path(pid, "stat"))
	if err != nil {
		return 0, err
	}
	return parseStatTicks(string(b))
}

// CPUTime returns the user+system CPU time of process pid.
func CPUTime(pid int) (time.Duration, error) {
	t, err := CPUTicks(pid)
	if err != nil {
		return 0, err
	}
	return time.Duration(t) * time.Second / time.Duration(ClockTicks()), nil
}

// parseStatTicks extracts utime (field 14) + stime (field 15) from a /proc/PID/stat line.
// The command name (field 2) is parenthesised and may hold spaces, so fields are counted
// after its closing parenthesis.
func parseStatTicks(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("procstat: malformed stat line")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14 → f[11], stime field 15 → f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("procstat: stat line has %d fields after the name", len(f))
	}
	u, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("procstat: utime: %w", err)
	}
	s, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("procstat: stime: %w", err)
	}
	return u + s, nil
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
		return 0, fmt.Errorf("procstat: malformed /proc/stat line %q", line)
	}
	var sum int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procstat: /proc/stat field %d: %w", i, err)
		}
		sum += v
	}
	return sum, nil
}

// StatusKiB reads a memory field of /proc/PID/status ("VmRSS", "VmHWM", "RssAnon"...)
// in KiB.
func StatusKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(path(pid, "status"))
	if err != nil {
		return 0, err
	}
	return parseStatusKiB(string(b), field)
}

// parseStatusKiB finds "Field:   1234 kB" in a /proc/PID/status text.
func parseStatusKiB(status, field string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, fmt.Errorf("procstat: %s has no value", field)
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, fmt.Errorf("procstat: no %s line", field)
}

// FDs counts the open files of process pid (/proc/PID/fd).
func FDs(pid int) (int, error) {
	es, err := os.ReadDir(path(pid, "fd"))
	if err != nil {
		return 0, err
	}
	return len(es), nil
}

// OpenFilesLimit reads the soft "Max open files" of pid from /proc/PID/limits
// ("unlimited" is 1<<40).
func OpenFilesLimit(pid int) (int64, error) {
	b, err := os.ReadFile(path(pid, "limits"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				if f[0] == "unlimited" {
					return 1 << 40, nil
				}
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, errors.New("procstat: no Max open files line")
}

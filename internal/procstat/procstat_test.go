package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParseStatTicks_SkipsParenthesisedName(t *testing.T) {
	line := "4242 (roster (n1) x) S 1 4242 4242 0 -1 4194560 5000 0 0 0 1234 567 0 0 20 0 12 0 100 0 0"
	got, err := parseStatTicks(line)
	if err != nil || got != 1234+567 {
		t.Fatalf("got %d %v, want 1801", got, err)
	}
	if _, err := parseStatTicks("garbage"); err == nil {
		t.Fatal("garbage accepted")
	}
}

func TestParseMachineTicks_SumsBusyFields(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	got, err := parseMachineTicks("cpu  100 2 30 5000 70 4 5 6 0 0")
	if err != nil || got != 100+2+30+4+5+6 {
		t.Fatalf("got %d %v, want 147 (idle and iowait excluded)", got, err)
	}
	if _, err := parseMachineTicks("cpu0 1 2 3"); err == nil {
		t.Fatal("short line accepted")
	}
}

func TestParseStatusKiB(t *testing.T) {
	status := "Name:\troster\nVmHWM:\t  20480 kB\nVmRSS:\t   10240 kB\nThreads:\t9\n"
	if v, err := parseStatusKiB(status, "VmRSS"); v != 10240 || err != nil {
		t.Errorf("VmRSS %d %v", v, err)
	}
	if v, err := parseStatusKiB(status, "VmHWM"); v != 20480 || err != nil {
		t.Errorf("VmHWM %d %v", v, err)
	}
	if v, err := parseStatusKiB(status, "VmSwap"); err == nil {
		t.Errorf("missing field read as %d", v)
	}
}

// The readers agree on this process, by pid and as pid 0, and see CPU being used.
func TestReaders_ThisProcess(t *testing.T) {
	if ClockTicks() <= 0 {
		t.Fatal("no clock tick rate")
	}
	before, err := CPUTime(0)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); {
	}
	after, err := CPUTime(os.Getpid())
	if err != nil || after <= before {
		t.Fatalf("CPU time %s then %s (%v)", before, after, err)
	}
	if _, err := MachineCPUTicks(); err != nil {
		t.Fatal(err)
	}
	if rss, err := StatusKiB(os.Getpid(), "VmRSS"); err != nil || rss <= 0 {
		t.Fatalf("VmRSS %d %v", rss, err)
	}
	if n, err := FDs(0); err != nil || n < 3 {
		t.Fatalf("%d open files %v", n, err)
	}
	if lim, err := OpenFilesLimit(os.Getpid()); err != nil || lim <= 0 {
		t.Fatalf("open-file limit %d %v", lim, err)
	}
}

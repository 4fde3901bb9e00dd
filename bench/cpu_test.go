package bench

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

func TestCPUMeter_MeasuresBusyProcess(t *testing.T) {
	if ClockTicks() <= 0 {
		t.Fatal("no clock tick rate")
	}
	if _, err := ProcCPUTicks(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	m := NewCPUMeter([]int{0})
	m.WindowStart(time.Now())
	deadline := time.Now().Add(300 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	m.WindowEnd(time.Now())
	cores, err := m.Cores()
	if err != nil {
		t.Fatal(err)
	}
	// The machine may be shared with other work, so only require that CPU was seen.
	if cores <= 0 || cores > 4 {
		t.Fatalf("a busy loop used %.2f cores (x=%d)", cores, x)
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
	if _, err := MachineCPUTicks(); err != nil {
		t.Fatal(err)
	}
}

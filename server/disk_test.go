package server

import (
	"testing"

	"github.com/rosterhq/roster/internal/diskstat"
)

func TestDiskLow(t *testing.T) {
	for _, tc := range []struct {
		u   diskstat.Usage
		low bool
	}{
		{diskstat.Usage{Free: 50 << 30, Total: 100 << 30}, false},
		{diskstat.Usage{Free: 4 << 30, Total: 100 << 30}, true},  // under 5 %
		{diskstat.Usage{Free: 200 << 20, Total: 1 << 30}, true},  // under 256 MiB
		{diskstat.Usage{Free: 300 << 20, Total: 1 << 30}, false}, // 29 %, 300 MiB
		{diskstat.Usage{Free: 0, Total: 0}, true},                // nothing free at all
	} {
		if got := diskLow(tc.u); got != tc.low {
			t.Errorf("diskLow(%+v) = %v, want %v", tc.u, got, tc.low)
		}
	}
}
